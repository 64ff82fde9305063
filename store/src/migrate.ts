// Numbered SQL migrations (store/migrations/NNN_name.sql), applied in order and recorded in
// schema_migrations. Safe under concurrent migrators, as graphile-worker's migrate.ts: every migrator
// takes one session advisory lock on a dedicated client before it even creates schema_migrations, so
// the second one waits, then finds the work done. Each migration runs in its own transaction.
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type pg from "pg";

export type Migration = { version: number; name: string; sql: string };

/** Fixed pg_advisory_lock key: the bytes of "flowsvc" (0x666c6f77737663), recognisable in pg_locks. */
export const MIGRATION_LOCK_KEY = "28829673625712227";

const FILE_NAME = /^(\d+)_([a-z0-9_]+)\.sql$/;

/** store/migrations/, resolved from the compiled module in store/dist. */
export const MIGRATIONS_DIR = new URL("../migrations/", import.meta.url);

/** The migrations this code knows, in version order. */
export async function listMigrations(dir: URL = MIGRATIONS_DIR): Promise<Migration[]> {
  const path = fileURLToPath(dir);
  const out: Migration[] = [];
  for (const file of (await readdir(path)).sort()) {
    const m = FILE_NAME.exec(file);
    if (!m?.[1] || !m[2]) continue;
    const version = Number(m[1]);
    if (out.some((x) => x.version === version)) throw new Error(`two migrations share version ${version} in ${path}`);
    out.push({ version, name: `${m[1]}_${m[2]}`, sql: await readFile(new URL(file, dir), "utf8") });
  }
  return out.sort((a, b) => a.version - b.version);
}

/** A digest of every migration's name and text: a template built from other files is stale. */
export function migrationsDigest(migrations: readonly Migration[]): string {
  const h = createHash("sha256");
  for (const m of migrations) h.update(`${m.name}\0${m.sql}\0`);
  return h.digest("hex");
}

/** Applies the pending migrations; `dir` is for tests (a folder with a trailing slash). */
export async function migrate(
  pool: pg.Pool,
  log: (msg: string) => void = () => {},
  dir: URL = MIGRATIONS_DIR,
): Promise<{ applied: string[] }> {
  const migrations = await listMigrations(dir);
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query(`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`);
    try {
      return await applyPending(client, migrations, log);
    } finally {
      await client.query(`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`).catch((err: Error) => (broken = err));
    }
  } catch (err) {
    broken ??= err instanceof Error ? err : new Error(String(err));
    throw err;
  } finally {
    // A client whose session may still hold the lock or an open transaction is destroyed, not reused.
    client.release(broken);
  }
}

async function applyPending(
  client: pg.PoolClient,
  migrations: readonly Migration[],
  log: (msg: string) => void,
): Promise<{ applied: string[] }> {
  await client.query(`create table if not exists schema_migrations (
    version     integer primary key,
    name        text not null,
    applied_at  timestamptz not null default now()
  )`);
  const { rows } = await client.query<{ version: number; name: string }>("select version, name from schema_migrations order by version");
  const known = new Set(migrations.map((m) => m.version));
  const latest = migrations.at(-1)?.version ?? 0;
  const unknown = rows.filter((r) => !known.has(r.version) && r.version > latest);
  if (unknown.length > 0) {
    const names = unknown.map((r) => r.name).join(", ");
    throw new Error(
      `the database has migration ${names}, newer than this flowsvc knows (latest ${latest}): upgrade flowsvc, or use a database that matches it`,
    );
  }
  const done = new Set(rows.map((r) => r.version));
  const applied: string[] = [];
  for (const m of migrations) {
    if (done.has(m.version)) continue;
    log(`migrating: ${m.name}`);
    await client.query("begin");
    try {
      await client.query(m.sql);
      await client.query("insert into schema_migrations (version, name) values ($1, $2)", [m.version, m.name]);
      await client.query("commit");
    } catch (err) {
      await client.query("rollback").catch(() => {});
      throw new Error(`migration ${m.name} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    applied.push(m.name);
  }
  return { applied };
}
