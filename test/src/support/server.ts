import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { createTestDatabase } from "@flowsvc/store";

export const REPO_ROOT = resolve(import.meta.dirname, "..", "..", "..");
export const FLOW_BIN = join(REPO_ROOT, "cli", "dist", "bin", "flow.js");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  env?: Record<string, string | undefined>;
  input?: string;
  cwd?: string;
  timeoutMs?: number;
}

export interface TestServer {
  url: string;
  token: string;
  project: string;
  dataDir: string;
  /** The Postgres the server uses, when it is not the embedded one. */
  databaseUrl: string | undefined;
  /** The CLI config file the server wrote at its first start. */
  configPath: string;
  /** Server output so far (banner and warnings). */
  output(): string;
  process: ChildProcess;
  /** Runs the real `flow` binary against this server. */
  cli(args: string[], opts?: CliOptions): Promise<CliResult>;
  /** Kills the server process with a signal and waits for it to exit. */
  kill(signal: NodeJS.Signals): Promise<void>;
  /** Starts the server again on the same data dir (and database) after a stop or kill. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface TestServerOptions {
  /** Use the embedded Postgres in the data dir instead of a database of the shared test cluster. */
  embedded?: boolean;
  /** Use this Postgres (FLOWSVC_DATABASE_URL) instead of a fresh database of the test cluster. */
  databaseUrl?: string;
  /** With databaseUrl: the master key (base64); a random one otherwise. */
  masterKey?: string;
  agents?: number;
  leaseMs?: number;
  env?: Record<string, string | undefined>;
  /** Where the data dir is made (a small filesystem, to fill it); the system temp dir by default. */
  dataDirParent?: string;
}

/** Runs `flow <args>` with the given environment and collects its output. */
export const runFlow = (args: string[], env: Record<string, string | undefined>, opts: CliOptions = {}): Promise<CliResult> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [FLOW_BIN, ...args], {
      env: { ...process.env, ...env, ...opts.env },
      cwd: opts.cwd ?? REPO_ROOT,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    });
    child.stdin.end(opts.input ?? "");
  });

const waitForBanner = (child: ChildProcess, out: { text: string }): Promise<string> =>
  new Promise((resolvePromise, reject) => {
    const onData = (d: string): void => {
      out.text += d;
      const m = /flowsvc is running at (\S+)/.exec(out.text);
      if (m) resolvePromise(m[1]!);
    };
    child.stdout!.setEncoding("utf8").on("data", onData);
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (out.text += d));
    child.once("exit", (code) => reject(new Error(`flow server exited with ${code} before it was ready:\n${out.text}`)));
  });

/** A real `flow server` process on a free port with its own data dir and CLI config. */
export const startTestServer = async (opts: TestServerOptions = {}): Promise<TestServer> => {
  const dataDir = await mkdtemp(join(opts.dataDirParent ?? tmpdir(), "flowsvc-test-"));
  const configPath = join(dataDir, "cli-config.json");
  const db = opts.embedded || opts.databaseUrl ? undefined : await createTestDatabase();
  const databaseUrl = opts.databaseUrl ?? db?.url;
  const serverEnv: Record<string, string | undefined> = {
    ...process.env,
    FLOWSVC_CONFIG: configPath,
    FLOWSVC_URL: undefined,
    FLOWSVC_TOKEN: undefined,
    FLOWSVC_PROJECT: undefined,
    ...(databaseUrl ? { FLOWSVC_DATABASE_URL: databaseUrl, FLOWSVC_MASTER_KEY: opts.masterKey ?? randomBytes(32).toString("base64") } : {}),
    ...opts.env,
  };
  const out = { text: "" };
  let child!: ChildProcess;
  let url = "";
  let port = "0";
  const start = async (): Promise<void> => {
    out.text = "";
    child = spawn(
      process.execPath,
      [
        FLOW_BIN,
        "server",
        "--port",
        port,
        "--data-dir",
        dataDir,
        "--agents",
        String(opts.agents ?? 4),
        "--lease-ms",
        String(opts.leaseMs ?? 3000),
      ],
      { env: serverEnv, stdio: ["ignore", "pipe", "pipe"] },
    );
    url = await waitForBanner(child, out);
    port = new URL(url).port;
  };
  await start();
  const token = (await readFile(join(dataDir, "admin.token"), "utf8")).trim();
  const exited = (): Promise<void> =>
    new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once("exit", () => r())));

  const server: TestServer = {
    get url() {
      return url;
    },
    token,
    project: "default/default",
    dataDir,
    databaseUrl,
    configPath,
    output: () => out.text,
    get process() {
      return child;
    },
    cli: (args, cliOpts) =>
      runFlow(args, { FLOWSVC_CONFIG: configPath, FLOWSVC_URL: undefined, FLOWSVC_TOKEN: undefined, FLOWSVC_PROJECT: undefined }, cliOpts),
    async kill(signal) {
      child.kill(signal);
      await exited();
    },
    restart: start,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        await exited();
      }
      await db?.drop().catch(() => undefined);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return server;
};
