// Real-Postgres test databases, fast: one migrated template database per cluster, cloned for each
// test with CREATE DATABASE ... TEMPLATE (graphile-worker's __tests__/helpers.ts does the same).
//
// The cluster: FLOWSVC_TEST_PG_URL (an admin URL; scripts/run-tests.mjs starts one embedded cluster
// for the whole run and passes it down), else one embedded cluster per process in a temp dir,
// stopped when the process exits. Test processes run in parallel, so the template is built under an
// advisory lock and is never connected to once built (a connected template cannot be cloned).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { startEmbeddedPostgres, stopPostgresSync } from "./embedded-postgres.js";
import { listMigrations, migrate, migrationsDigest } from "./migrate.js";
import { createPool, withTransaction } from "./pool.js";
import type { Keyring } from "./keyring.js";
import { createRun } from "./run-lifecycle.js";
import { mintId } from "./mint.js";

export type TestDatabase = { url: string; pool: pg.Pool; drop(): Promise<void> };
export type TestCluster = { url: string; pool: pg.Pool };

export const TEMPLATE_DATABASE = "flowsvc_template";
/** pg_advisory_lock key for building templates: the bytes of "flowtpl". */
const TEMPLATE_LOCK_KEY = "28829673625776236";

// Measured on the 2-core dev box, embedded PG 18 with fsync off, a template holding 001_init:
// CREATE DATABASE ... STRATEGY wal_log (the default since PG 15) 140 ms, file_copy 38 ms; DROP
// 15 ms vs 6 ms. file_copy checkpoints, which is cheap here. Older servers know no STRATEGY.
let cloneStrategy = "";
let cluster: Promise<TestCluster> | undefined;
let templateReady: Promise<unknown> | undefined;

/**
 * A new database of its own for one test: migrated (cloned from the template), or with
 * `empty: true` a blank one (for testing migrations themselves). Call drop() when done.
 */
export async function createTestDatabase(opts: { empty?: boolean } = {}): Promise<TestDatabase> {
  const admin = await testCluster();
  if (!opts.empty) {
    templateReady ??= ensureTemplateDatabase(admin).catch((err: unknown) => {
      templateReady = undefined;
      throw err;
    });
    await templateReady;
  }
  const name = `test_${randomBytes(8).toString("hex")}`;
  const template = opts.empty ? "template0" : TEMPLATE_DATABASE;
  await admin.pool.query(`create database ${pg.escapeIdentifier(name)} template ${pg.escapeIdentifier(template)}${cloneStrategy}`);
  const url = withDatabase(admin.url, name);
  const pool = createPool(url, { max: 5, applicationName: "flowsvc-test", allowExitOnIdle: true });
  let dropping: Promise<void> | undefined;
  const drop = () =>
    (dropping ??= (async () => {
      await pool.end();
      await admin.pool.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
    })());
  return { url, pool, drop };
}

/** The cluster test databases are made in, with an admin pool on it (started on first use). */
export function testCluster(): Promise<TestCluster> {
  cluster ??= openTestCluster();
  return cluster;
}

async function openTestCluster(): Promise<TestCluster> {
  // eslint-disable-next-line no-restricted-properties -- test harness: the runner hands its cluster down through the environment
  const given = process.env.FLOWSVC_TEST_PG_URL;
  const url = given || withDatabase(await startProcessCluster(), "postgres");
  const pool = createPool(url, { max: 3, applicationName: "flowsvc-test-admin", allowExitOnIdle: true });
  const { rows } = await pool.query<{ v: string }>("select current_setting('server_version_num') as v");
  if (Number(rows[0]?.v) >= 150000) cloneStrategy = " strategy file_copy";
  return { url, pool };
}

async function startProcessCluster(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "flowsvc-test-pg-"));
  const pgc = await startEmbeddedPostgres({ dataDir: dir, durable: false });
  let cleaned = false;
  const cleanup = () => {
    if (cleaned) return;
    cleaned = true;
    stopPostgresSync(pgc.pid);
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", cleanup);
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    // Clean up, then die of the same signal (with our listener gone, the default action applies).
    process.once(sig, () => {
      cleanup();
      process.kill(process.pid, sig);
    });
  }
  return pgc.url;
}

/**
 * Makes `name` a database migrated to the current migration files. It is stamped (a comment on
 * the database) with a digest of those files when complete, and rebuilt when the stamp differs:
 * behind the files, edited files, or a build that died half way.
 */
export async function ensureTemplateDatabase(admin: TestCluster, name: string = TEMPLATE_DATABASE): Promise<{ rebuilt: boolean }> {
  const migrations = await listMigrations();
  const stamp = `flowsvc migrations ${migrations.at(-1)?.version ?? 0} ${migrationsDigest(migrations)}`;
  const db = pg.escapeIdentifier(name);
  const client = await admin.pool.connect();
  try {
    await client.query(`select pg_advisory_lock(${TEMPLATE_LOCK_KEY})`);
    try {
      const { rows } = await client.query<{ stamp: string | null }>(
        "select shobj_description(oid, 'pg_database') as stamp from pg_database where datname = $1",
        [name],
      );
      if (rows[0]?.stamp === stamp) return { rebuilt: false };
      if (rows.length > 0) await client.query(`drop database ${db} with (force)`);
      await client.query(`create database ${db} template template0`);
      const pool = createPool(withDatabase(admin.url, name), { max: 1, applicationName: "flowsvc-test-template" });
      try {
        await migrate(pool);
      } finally {
        await pool.end();
      }
      await client.query(`alter database ${db} allow_connections false`);
      await client.query(`comment on database ${db} is ${pg.escapeLiteral(stamp)}`);
      return { rebuilt: true };
    } finally {
      await client.query(`select pg_advisory_unlock(${TEMPLATE_LOCK_KEY})`);
    }
  } finally {
    client.release();
  }
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** A fresh org with one project `p` in a test database: the project's id (and its org's). */
export const createTestProject = async (pool: pg.Pool): Promise<{ projectId: string; orgId: string }> => {
  const orgId = mintId("org");
  const projectId = mintId("prj");
  await pool.query(`insert into orgs (id, name) values ($1, $1)`, [orgId]);
  await pool.query(`insert into projects (id, org_id, name) values ($1, $2, 'p')`, [projectId, orgId]);
  return { projectId, orgId };
};

/** Gives the org a data key made by `keyring` (the org_keys row the server makes with the org), so values of its projects can be sealed. */
export const addTestOrgKey = async (pool: pg.Pool, keyring: Keyring, orgId: string): Promise<void> => {
  await pool.query(`insert into org_keys (org_id, wrapped) values ($1, $2)`, [orgId, Buffer.from(await keyring.newWrappedOrgKey(orgId))]);
};

/** A queued, trusted run of `true` in the project (its job ready to dispatch): the run's id. */
export const createTestRun = async (pool: pg.Pool, projectId: string): Promise<string> => {
  const id = mintId("run");
  await withTransaction(pool, (tx) =>
    createRun(tx, { id, projectId, source: "true\n", filename: "t.sh", trusted: true, trigger: { type: "manual", sender: "test" } }),
  );
  return id;
};

/**
 * Polls `check` every `everyMs` until it holds; throws, naming `what`, after `timeoutMs`. The one
 * condition wait of the tests (test/src/support/wait.ts re-exports it): a test waits on a row, a
 * file or a log line, never a fixed time.
 */
export const waitFor = async (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000, everyMs = 100): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
};
