/**
 * Test support: runs both in-script clients (the native binary and the Node fallback, as built by
 * scripts/build-native.mjs) against a ProtocolPeer with the same cases, and checks that the two
 * put the same requests on the wire.
 */
import { spawn } from "node:child_process";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { after, test } from "node:test";
import type { TestContext } from "node:test";
import { ProtocolPeer } from "./client-test-peer.js";

export const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));

export interface Client {
  name: "native" | "node";
  bin: string;
}

const native: Client = { name: "native", bin: join(repoRoot, "agent-image", "bin", "flow-native") };
const node: Client = { name: "node", bin: join(repoRoot, "agent-image", "bin-node", "flow") };

export const nativeBuilt = existsSync(native.bin);
/** The native client only where it was built (a host without a compiler tests the fallback). */
export const clients: readonly Client[] = nativeBuilt ? [native, node] : [node];

export const scratch = mkdtempSync(join(tmpdir(), "flow-client-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

let peers = 0;
export const scratchPath = (name: string): string => join(scratch, `${peers++}-${name}`);

export interface Ran {
  code: number | null;
  /** The signal that ended the process, if one did. */
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
}

export interface RunOptions {
  /** Replaces the default environment entirely (still gets PATH). */
  env?: Record<string, string>;
  /** Added to the default environment. */
  extraEnv?: Record<string, string>;
  stdin?: string | Buffer;
  cwd?: string;
}

/** A fixed PATH: the cases need only sh and coreutils, and must not depend on the caller's. */
const PATH = "/usr/local/bin:/usr/bin:/bin";

/** The environment of a script run by the agent, as far as the client cares. */
export const scriptEnv = (peer: ProtocolPeer): Record<string, string> => ({
  PATH,
  FLOW_AGENT_SOCKET: peer.path,
  FLOW_AGENT_ID: "agt-test",
  FLOW_WORKFLOW_ID: "run-test",
  KEEP_ME: "kept",
});

export interface Started {
  child: ChildProcessWithoutNullStreams;
  done: Promise<Ran>;
}

/** Starts a process; `done` settles when it has ended and its output is closed. */
export const start = (file: string, args: readonly string[], opts: RunOptions = {}): Started => {
  const env = { PATH, ...opts.env, ...opts.extraEnv };
  const child = spawn(file, args, { env, cwd: opts.cwd, stdio: ["pipe", "pipe", "pipe"] });
  const done = new Promise<Ran>((resolve, reject) => {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (d: Buffer) => out.push(d));
    child.stderr.on("data", (d: Buffer) => err.push(d));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString("utf8") }));
    child.stdin.on("error", () => undefined);
    child.stdin.end(opts.stdin ?? "");
  });
  return { child, done };
};

export const run = (file: string, args: readonly string[], opts: RunOptions = {}): Promise<Ran> => start(file, args, opts).done;

/** Runs the client inside a script's environment. */
export const runClient = (client: Client, peer: ProtocolPeer, args: readonly string[], opts: RunOptions = {}): Promise<Ran> =>
  run(client.bin, args, { ...opts, env: opts.env ?? scriptEnv(peer) });

/** Starts the client inside a script's environment without waiting for it. */
export const startClient = (client: Client, peer: ProtocolPeer, args: readonly string[], opts: RunOptions = {}): Started =>
  start(client.bin, args, { ...opts, env: opts.env ?? scriptEnv(peer) });

/** Resolves once check() holds; fails after ms. */
export const until = async (check: () => boolean, what: string, ms = 5000): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

/** Runs a sh script with $CLIENT set to the client binary, in a script's environment. */
export const runShell = (client: Client, peer: ProtocolPeer, script: string, extraEnv: Record<string, string> = {}): Promise<Ran> =>
  run("/bin/sh", ["-c", script], { env: { ...scriptEnv(peer), CLIENT: client.bin, ...extraEnv } });

const clip = (line: string | undefined): string => (line === undefined ? "(none)" : line.length > 300 ? `${line.slice(0, 300)}...` : line);

const assertSameWire = (native: readonly string[], node: readonly string[]): void => {
  for (let i = 0; i < Math.max(native.length, node.length); i++) {
    if (native[i] !== node[i])
      assert.fail(`request ${i} differs between the clients:\nnative: ${clip(native[i])}\nnode:   ${clip(node[i])}`);
  }
};

/**
 * One behaviour, checked on each client as a subtest with a fresh peer; then the two clients'
 * request lines are compared: they must be the same bytes.
 */
export const forBoth = (title: string, body: (client: Client, peer: ProtocolPeer, t: TestContext) => Promise<void>): void => {
  void test(title, async (t) => {
    const wires: string[][] = [];
    for (const client of clients) {
      await t.test(client.name, async (st) => {
        const peer = await ProtocolPeer.start(scratchPath("agent.sock"));
        try {
          await body(client, peer, st);
          wires.push(peer.lines);
        } finally {
          await peer.close();
        }
      });
    }
    if (wires.length === 2) assertSameWire(wires[0] ?? [], wires[1] ?? []);
  });
};

export const b64 = (data: string | Buffer): string => Buffer.from(data).toString("base64");
