// The embedded Postgres of local mode: the server binaries shipped in `@embedded-postgres/<platform>`,
// run directly (not through the `embedded-postgres` JS class, whose exit hooks fight our own signal
// handling). Layout of the data dir:
//   pg/             the cluster (owned by the server's user, mode 0700)
//   pg-password     the superuser password (0600, owned by us)
//   pg-owner        {pid, start} of the process that started the running postmaster
//   pg-runtime/<v>/ a readable copy of the binaries, made only when root and they are unreadable
//   postgres.log    the server's stderr (an fd we open, so the server needs no write access here)
//
// Postgres refuses to run as root. As root we run initdb and postgres as `nobody`: it always exists,
// needs no change to /etc/passwd, and the cluster stays private (0700) to a user no login or daemon
// of ours uses (local agents run as another one, flowsvc-agent, so a script cannot read pg/; both
// come from system-user.ts). A dedicated system user would be tidier on a shared host, but creating one means
// mutating the machine from a library call; as root we are nearly always in a container anyway.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import { chmod, chown, mkdir, readdir, readFile, readlink, realpath, rename, rm, stat, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import pg from "pg";
import { blockedDirFor, copyReadableOnce, lookupUser, type SystemUser } from "./system-user.js";

export type EmbeddedPostgres = {
  /** Over TCP on 127.0.0.1 (any process of the host that has the password). */
  url: string;
  /**
   * For the server's own pool: over Postgres's Unix socket in pg/ (that directory is the Postgres
   * user's alone; a round trip there costs both sides less CPU than TCP on loopback), or `url` when
   * the socket's path would not fit (a long data dir) or needs quoting.
   */
  localUrl: string;
  port: number;
  pid: number;
  stop(): Promise<void>;
};

export type EmbeddedPostgresOptions = {
  dataDir: string;
  log?: (msg: string) => void;
  /** false for throwaway clusters (tests): initdb --no-sync, fsync off. Default true. */
  durable?: boolean;
  /** Server binaries to run instead of the bundled ones, e.g. /usr/lib/postgresql/15/bin. */
  binDir?: string;
};

type RunAs = SystemUser;
type Ctx = { dataDir: string; pgDir: string; binDir: string; runAs: RunAs | undefined; log: (msg: string) => void; durable: boolean };

const SUPERUSER = "postgres";
const DATABASE = "flowsvc";
const READY_TIMEOUT_MS = 60_000;

/** The data dir made (and reachable by the server's user when root), the binaries found: where and how the server runs. */
async function prepareContext(opts: EmbeddedPostgresOptions): Promise<Ctx> {
  const log = opts.log ?? (() => {});
  const dataDir = resolve(opts.dataDir);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const runAs = process.getuid?.() === 0 ? postgresUser() : undefined;
  if (runAs) await makeReachable(dataDir, runAs);
  const shipped = opts.binDir ?? (await bundledBinDir());
  const binDir = runAs ? await readableBinDir(shipped, dataDir, runAs, log) : shipped;
  return { dataDir, pgDir: join(dataDir, "pg"), binDir, runAs, log, durable: opts.durable ?? true };
}

/** Another process took the port between our probe and the server's bind. */
function lostThePort(err: unknown): boolean {
  return err instanceof Error && /could not bind|Address already in use/i.test(err.message);
}

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const ctx = await prepareContext(opts);
  const { dataDir } = ctx;
  const password = await ensureCluster(ctx);
  await stopStalePostmaster(ctx);
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      const pid = await launch(ctx, port, password);
      await writeFile(join(dataDir, "pg-owner"), JSON.stringify({ pid: process.pid, start: processStartTime(process.pid) }));
      let stopping: Promise<void> | undefined;
      const stop = () => (stopping ??= stopPostmaster(ctx, pid));
      const url = `postgres://${SUPERUSER}:${password}@127.0.0.1:${port}/${DATABASE}`;
      const socketDir = socketDirFor(ctx.pgDir, port);
      const localUrl = socketDir ? `${url}?host=${encodeURIComponent(socketDir)}` : url;
      return { url, localUrl, port, pid, stop };
    } catch (err) {
      // Another process may take the port between our probe and the server's bind: try again.
      if (attempt < 3 && lostThePort(err)) continue;
      throw err;
    }
  }
}

async function bundledBinDir(): Promise<string> {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const mod = (await import(pkg)) as { postgres: string };
    return dirname(mod.postgres);
  } catch (err) {
    throw new Error(`embedded Postgres: no server binaries for ${process.platform}-${process.arch} (npm package ${pkg} is not installed)`, {
      cause: err,
    });
  }
}

/** Who embedded Postgres runs as when flowsvc runs as root (no one else may share it: it owns pg/). */
export const EMBEDDED_POSTGRES_USER = "nobody";

function postgresUser(): RunAs {
  const user = lookupUser(EMBEDDED_POSTGRES_USER);
  if (!user) throw new Error(`embedded Postgres: running as root, but there is no user "${EMBEDDED_POSTGRES_USER}" to run Postgres as`);
  return user;
}

/** The server's user must be able to reach the data dir: open our own dir for search, check the rest. */
async function makeReachable(dataDir: string, user: RunAs): Promise<void> {
  const dir = blockedDirFor(dirname(dataDir), user);
  if (dir !== undefined) {
    throw new Error(
      `embedded Postgres runs as "${user.name}" when flowsvc runs as root, and ${dir} (mode ${(statSync(dir).mode & 0o777).toString(8)}) ` +
        `keeps it out of ${dataDir}. Choose a data dir under a path other users can traverse (e.g. /var/lib/flowsvc), or run as a normal user.`,
    );
  }
  const st = await stat(dataDir);
  if ((st.mode & 0o001) === 0) await chmod(dataDir, (st.mode & 0o777) | 0o001);
}

function runsAs(binDir: string, user: RunAs): boolean {
  const r = spawnSync(join(binDir, "postgres"), ["--version"], { uid: user.uid, gid: user.gid, stdio: "ignore", timeout: 10_000 });
  return r.status === 0;
}

/**
 * When root and the binaries are unreadable to the server's user (e.g. node_modules under /root),
 * copy their tree (bin, lib, share: the binaries find lib and share relative to themselves) once.
 */
async function readableBinDir(binDir: string, dataDir: string, user: RunAs, log: (msg: string) => void): Promise<string> {
  if (runsAs(binDir, user)) return binDir;
  const tree = dirname(binDir);
  if (!existsSync(join(tree, "share", "postgresql"))) {
    throw new Error(`embedded Postgres: "${user.name}" cannot run ${join(binDir, "postgres")}; make it readable or run as a normal user`);
  }
  const dest = join(dataDir, "pg-runtime", await treeVersion(tree));
  await copyReadableOnce(dest, [{ from: tree, to: "." }], { log: (m) => log(`embedded Postgres: ${m} so "${user.name}" can run them`) });
  const copied = join(dest, "bin");
  if (!runsAs(copied, user)) throw new Error(`embedded Postgres: "${user.name}" cannot run the copied binaries in ${copied}`);
  return copied;
}

/** The npm package's exact version (`18.4.0-beta.17`), else what the server says (`18.4`). */
async function treeVersion(tree: string): Promise<string> {
  const pkg = await readFile(join(tree, "..", "package.json"), "utf8").then(
    (s) => JSON.parse(s) as { version?: string },
    () => undefined,
  );
  if (pkg?.version) return pkg.version;
  const r = spawnSync(join(tree, "bin", "postgres"), ["--version"], { encoding: "utf8" });
  return /\d+(\.\d+)*/.exec(r.stdout ?? "")?.[0] ?? "unknown";
}

async function chownTree(path: string, user: RunAs): Promise<void> {
  await chown(path, user.uid, user.gid);
  for (const entry of await readdir(path, { withFileTypes: true })) {
    const p = join(path, entry.name);
    if (entry.isDirectory()) await chownTree(p, user);
    else await chown(p, user.uid, user.gid);
  }
}

function serverEnv(binDir: string): Record<string, string> {
  // A fixed, minimal environment: nothing of ours (master key, tokens) leaks into the server.
  const env: Record<string, string> = { LC_ALL: "C", PATH: "/usr/local/bin:/usr/bin:/bin" };
  const lib = join(dirname(binDir), "lib");
  if (existsSync(lib)) env.LD_LIBRARY_PATH = lib;
  return env;
}

function spawnOpts(ctx: Ctx) {
  return { cwd: ctx.dataDir, env: serverEnv(ctx.binDir), ...(ctx.runAs ? { uid: ctx.runAs.uid, gid: ctx.runAs.gid } : {}) };
}

/** Opens the cluster, or creates it on first start; returns the superuser password. */
async function ensureCluster(ctx: Ctx): Promise<string> {
  const pwPath = join(ctx.dataDir, "pg-password");
  if (!existsSync(join(ctx.pgDir, "PG_VERSION"))) return initCluster(ctx, pwPath);
  if (!existsSync(pwPath))
    throw new Error(`embedded Postgres: ${pwPath} is missing; the cluster in ${ctx.pgDir} cannot be opened without it`);
  if (ctx.runAs && statSync(ctx.pgDir).uid !== ctx.runAs.uid) {
    ctx.log(`embedded Postgres: giving ${ctx.pgDir} to "${ctx.runAs.name}"`);
    await chownTree(ctx.pgDir, ctx.runAs);
  }
  await chmod(ctx.pgDir, 0o700);
  return (await readFile(pwPath, "utf8")).trim();
}

/** initdb into a scratch dir, renamed to pg/ only when complete: a crash mid-way leaves no half cluster. */
async function initCluster(ctx: Ctx, pwPath: string): Promise<string> {
  if (existsSync(ctx.pgDir)) {
    if ((await readdir(ctx.pgDir)).length > 0)
      throw new Error(`embedded Postgres: ${ctx.pgDir} is not empty and is not a Postgres data directory`);
    await rm(ctx.pgDir, { recursive: true });
  }
  if (!existsSync(pwPath)) await writeFile(pwPath, randomBytes(24).toString("hex"), { mode: 0o600, flag: "wx" });
  await chmod(pwPath, 0o600);
  const password = (await readFile(pwPath, "utf8")).trim();
  for (const name of await readdir(ctx.dataDir)) {
    if (name.startsWith("pg.init-")) await rm(join(ctx.dataDir, name), { recursive: true, force: true });
  }
  const scratch = join(ctx.dataDir, `pg.init-${randomBytes(4).toString("hex")}`);
  const pwFile = `${scratch}.pw`; // readable by the server's user, unlike pg-password
  await mkdir(scratch, { mode: 0o700 });
  await writeFile(pwFile, password, { mode: 0o600 });
  if (ctx.runAs) {
    await chown(scratch, ctx.runAs.uid, ctx.runAs.gid);
    await chown(pwFile, ctx.runAs.uid, ctx.runAs.gid);
  }
  ctx.log(`embedded Postgres: creating a cluster in ${ctx.pgDir}`);
  const args = [
    "-D",
    scratch,
    "-U",
    SUPERUSER,
    `--pwfile=${pwFile}`,
    "--auth=scram-sha-256",
    "--encoding=UTF8",
    "--no-locale",
    "--no-instructions",
  ];
  if (!ctx.durable) args.push("--no-sync");
  try {
    await runInitdb(ctx, args);
  } finally {
    await rm(pwFile, { force: true });
  }
  await rename(scratch, ctx.pgDir);
  return password;
}

function runInitdb(ctx: Ctx, args: string[]): Promise<void> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(join(ctx.binDir, "initdb"), args, { ...spawnOpts(ctx), stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (out += b.toString()));
    child.on("error", (err) => reject(new Error(`embedded Postgres: could not run initdb: ${err.message}`)));
    child.on("close", (code, sig) => {
      if (code === 0) return resolveRun();
      const tail = out.trim().split("\n").slice(-15).join("\n");
      reject(new Error(`embedded Postgres: initdb failed (${sig ?? `exit ${code}`}):\n${tail}`));
    });
  });
}

/**
 * A SIGKILLed flowsvc leaves its postmaster running, holding postmaster.pid. Stop it, unless the
 * process that started it is still alive (then this data dir is in use and we must not touch it).
 */
async function stopStalePostmaster(ctx: Ctx): Promise<void> {
  const pidFile = join(ctx.pgDir, "postmaster.pid");
  const pid = Number((await readFile(pidFile, "utf8").catch(() => "")).split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  if (!(await isPostmasterOf(pid, ctx.pgDir))) {
    ctx.log(`embedded Postgres: removing stale ${pidFile} (process ${pid} is gone)`);
    await rm(pidFile, { force: true });
    return;
  }
  const owner = await readFile(join(ctx.dataDir, "pg-owner"), "utf8").then(
    (s) => JSON.parse(s) as { pid: number; start: string },
    () => undefined,
  );
  if (owner && owner.pid !== process.pid && pidAlive(owner.pid) && processStartTime(owner.pid) === owner.start) {
    throw new Error(
      `embedded Postgres: ${ctx.dataDir} is in use by process ${owner.pid} (its Postgres is pid ${pid}); stop that process first`,
    );
  }
  ctx.log(`embedded Postgres: stopping a postmaster left running by a previous run (pid ${pid})`);
  await stopProcess(pid);
}

async function isPostmasterOf(pid: number, pgDir: string): Promise<boolean> {
  if (!pidAlive(pid)) return false;
  // The postmaster chdir()s into its data directory: its cwd names the cluster it serves.
  const [cwd, want] = await Promise.all([readlink(`/proc/${pid}/cwd`).catch(() => ""), realpath(pgDir)]);
  return cwd === want;
}

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const addr = server.address();
      server.close(() => (addr && typeof addr === "object" ? resolvePort(addr.port) : reject(new Error("no port"))));
    });
  });
}

/** The longest socket path Linux and macOS take (sun_path), less its terminating NUL. */
const SOCKET_PATH_MAX = 103;

/**
 * The directory of Postgres's Unix socket (pg/ itself: only its owner may enter), or undefined
 * when the socket's path would be too long or the directory needs quoting in
 * `unix_socket_directories` (a list): then Postgres listens on TCP only.
 */
export function socketDirFor(pgDir: string, port: number): string | undefined {
  return Buffer.byteLength(join(pgDir, `.s.PGSQL.${port}`)) <= SOCKET_PATH_MAX && /^[\w/.-]+$/.test(pgDir) ? pgDir : undefined;
}

/** The postmaster's command line: TCP on 127.0.0.1, the socket in pg/ (socketDirFor), a throwaway cluster without flushes. */
function postgresArgs(ctx: Ctx, port: number): string[] {
  const socketDir = socketDirFor(ctx.pgDir, port) ?? "";
  const args = ["-D", ctx.pgDir, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", `unix_socket_directories=${socketDir}`];
  if (!ctx.durable) args.push("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off");
  return args;
}

async function launch(ctx: Ctx, port: number, password: string): Promise<number> {
  const logPath = join(ctx.dataDir, "postgres.log");
  if (existsSync(logPath) && statSync(logPath).size > 10 * 1024 * 1024) await rename(logPath, `${logPath}.1`);
  const from = existsSync(logPath) ? statSync(logPath).size : 0;
  const tail = () => logTail(logPath, from);
  const args = postgresArgs(ctx, port);

  // The server writes to a file we opened, never to a pipe, so it outlives us cleanly if we are
  // killed; detached puts it in its own process group, out of reach of a terminal's Ctrl-C.
  const fd = openSync(logPath, "a", 0o600);
  let exited: string | undefined;
  let spawnError: Error | undefined;
  const child = spawn(join(ctx.binDir, "postgres"), args, { ...spawnOpts(ctx), stdio: ["ignore", fd, fd], detached: true });
  closeSync(fd);
  child.unref();
  child.on("error", (err) => (spawnError = err));
  child.on("exit", (code, signal) => {
    exited = signal ?? `exit ${code}`;
    ctx.log(`embedded Postgres: postmaster ${child.pid} ended (${exited})`);
  });

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (spawnError) throw new Error(`embedded Postgres: could not start ${join(ctx.binDir, "postgres")}: ${spawnError.message}`);
    if (exited !== undefined) throw new Error(`embedded Postgres failed to start (${exited}). Log:\n${await tail()}`);
    if (Date.now() > deadline) {
      if (child.pid) await stopProcess(child.pid);
      throw new Error(`embedded Postgres did not accept connections within ${READY_TIMEOUT_MS / 1000}s. Log:\n${await tail()}`);
    }
    if (await createDatabaseIfMissing(port, password)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  ctx.log(`embedded Postgres: ready on 127.0.0.1:${port} (pid ${child.pid})`);
  return child.pid ?? 0;
}

/** false while the server is not yet accepting connections. */
async function createDatabaseIfMissing(port: number, password: string): Promise<boolean> {
  const client = new pg.Client({ host: "127.0.0.1", port, user: SUPERUSER, password, database: "postgres", connectionTimeoutMillis: 2000 });
  client.on("error", () => {});
  try {
    await client.connect();
  } catch {
    return false;
  }
  try {
    const { rowCount } = await client.query("select 1 from pg_database where datname = $1", [DATABASE]);
    if (rowCount === 0) await client.query(`create database ${DATABASE}`);
    return true;
  } finally {
    await client.end();
  }
}

async function logTail(path: string, from: number, lines = 25): Promise<string> {
  const text = await readFile(path).then(
    (b) => b.subarray(from).toString("utf8"),
    () => "",
  );
  return text.trimEnd().split("\n").slice(-lines).join("\n") || "(the log is empty)";
}

async function stopPostmaster(ctx: Ctx, pid: number): Promise<void> {
  await stopProcess(pid);
  await rm(join(ctx.dataDir, "pg-owner"), { force: true });
  ctx.log(`embedded Postgres: stopped (pid ${pid})`);
}

// Processes, by /proc (the bundled binaries are Linux builds). A zombie counts as gone: an orphan
// is reaped by whatever init the container has, if any.
function procStat(pid: number): string[] | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    return s.slice(s.lastIndexOf(")") + 2).split(" "); // [0] state (field 3), [19] starttime (field 22)
  } catch {
    return undefined;
  }
}

function pidAlive(pid: number): boolean {
  const st = procStat(pid);
  return st !== undefined && st[0] !== "Z" && st[0] !== "X";
}

function processStartTime(pid: number): string {
  return procStat(pid)?.[19] ?? "";
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

async function waitGone(pid: number, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 25))) {
    if (!pidAlive(pid)) return true;
  }
  return !pidAlive(pid);
}

/** Fast shutdown (SIGINT), then immediate (SIGQUIT), then SIGKILL for it and its backends. */
async function stopProcess(pid: number): Promise<void> {
  const children = readdirSync("/proc")
    .map(Number)
    .filter((c) => procStat(c)?.[1] === String(pid))
    .map((c) => ({ pid: c, start: processStartTime(c) }));
  for (const [sig, ms] of [
    ["SIGINT", 15_000],
    ["SIGQUIT", 5_000],
  ] as const) {
    signal(pid, sig);
    if (await waitGone(pid, ms)) return;
  }
  signal(pid, "SIGKILL");
  for (const c of children) if (processStartTime(c.pid) === c.start) signal(c.pid, "SIGKILL");
  if (!(await waitGone(pid, 5_000))) throw new Error(`embedded Postgres: process ${pid} survived SIGKILL`);
}

/** For process 'exit' handlers, where nothing async runs: fast shutdown, wait (sleeping), then SIGKILL. */
export function stopPostgresSync(pid: number, timeoutMs = 10_000): void {
  signal(pid, "SIGINT");
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  for (const end = Date.now() + timeoutMs; pidAlive(pid) && Date.now() < end;) Atomics.wait(sleeper, 0, 0, 20);
  if (pidAlive(pid)) signal(pid, "SIGKILL");
}
