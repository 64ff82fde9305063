import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { listMigrations, migrate } from "./migrate.js";
import { TERMINAL_STATUSES_SQL } from "@flowsvc/core";
import { createPool } from "./pool.js";
import { createTestDatabase } from "./testing.js";

test("the migrations folder is found from the compiled module, in numeric order", async () => {
  const migrations = await listMigrations();
  assert.equal(migrations[0]?.name, "001_init");
  assert.deepEqual(
    migrations.map((m) => m.version),
    [...migrations.map((m) => m.version)].sort((a, b) => a - b),
  );
});

test("two migrators racing on a fresh database both succeed and apply each migration once", async (t) => {
  const db = await createTestDatabase({ empty: true });
  t.after(() => db.drop());
  const other = createPool(db.url, { max: 2 });
  t.after(() => other.end());
  const names = (await listMigrations()).map((m) => m.name);

  const [a, b] = await Promise.all([migrate(db.pool), migrate(other)]);
  assert.deepEqual([...a.applied, ...b.applied].sort(), names, "every migration applied by exactly one of them");

  const { rows } = await db.pool.query<{ name: string }>("select name from schema_migrations order by version");
  assert.deepEqual(
    rows.map((r) => r.name),
    names,
  );
  const runs = await db.pool.query("select count(*)::int as n from runs");
  assert.deepEqual(runs.rows, [{ n: 0 }]);
  assert.deepEqual(await migrate(db.pool), { applied: [] }, "a later start has nothing to do");
});

test("a database migrated by newer code is refused with a clear error", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  await db.pool.query("insert into schema_migrations (version, name) values (9999, '9999_from_the_future')");
  await assert.rejects(migrate(db.pool), /9999_from_the_future, newer than this flowsvc knows/);
});

test("a failing migration is rolled back and not recorded; the ones before it stay", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "flowsvc-migrations-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "001_first.sql"), "create table first_table (id int);");
  writeFileSync(join(dir, "002_broken.sql"), "create table half_done (id int);\nselect 1 / 0;");
  writeFileSync(join(dir, "README.md"), "not a migration");
  const db = await createTestDatabase({ empty: true });
  t.after(() => db.drop());
  const logged: string[] = [];

  await assert.rejects(
    migrate(db.pool, (m) => logged.push(m), pathToFileURL(`${dir}/`)),
    /migration 002_broken failed: division by zero/,
  );
  const { rows } = await db.pool.query<{ name: string }>("select name from schema_migrations order by version");
  assert.deepEqual(
    rows.map((r) => r.name),
    ["001_first"],
  );
  const tables = await db.pool.query<{ t: string | null }>("select to_regclass('half_done')::text as t");
  assert.deepEqual(tables.rows, [{ t: null }]);
  assert.deepEqual(logged, ["migrating: 001_first", "migrating: 002_broken"]);

  // The pool is still healthy: the migrator's client did not leak its lock or transaction.
  assert.deepEqual(
    (
      await db.pool.query(
        "select count(*)::int as n from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())",
      )
    ).rows,
    [{ n: 0 }],
  );
});

test("a migration that names the terminal run statuses names exactly core's (an index predicate and a function cannot import them)", async () => {
  const named = (await listMigrations()).flatMap((m) =>
    [...m.sql.matchAll(/status not in \(([^)]*)\)/g)].map((hit) => ({ migration: m.name, list: hit[1]!.replace(/\s+/g, " ").trim() })),
  );
  assert.ok(named.length >= 2, `the cancel_on index (016) and the lone-batch function (019) name them: ${JSON.stringify(named)}`);
  for (const n of named) assert.equal(n.list, TERMINAL_STATUSES_SQL, `${n.migration}: a list of terminal statuses other than core's`);
});
