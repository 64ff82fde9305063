import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { listMigrations } from "./migrate.js";
import { createTestDatabase, ensureTemplateDatabase, testCluster } from "./testing.js";

test("each test database is its own, with the schema already migrated", async (t) => {
  const [a, b] = await Promise.all([createTestDatabase(), createTestDatabase()]);
  t.after(() => Promise.all([a.drop(), b.drop()]));
  assert.notEqual(a.url, b.url);

  const latest = (await listMigrations()).at(-1)?.name;
  for (const db of [a, b]) {
    const { rows } = await db.pool.query<{ name: string }>("select name from schema_migrations order by version desc limit 1");
    assert.equal(rows[0]?.name, latest);
  }
  await a.pool.query("insert into orgs (id, name) values ('org-1', 'only in a')");
  assert.deepEqual((await a.pool.query("select name from orgs")).rows, [{ name: "only in a" }]);
  assert.deepEqual((await b.pool.query("select name from orgs")).rows, []);
});

test("drop removes the database", async () => {
  const db = await createTestDatabase();
  const name = new URL(db.url).pathname.slice(1);
  await db.drop();
  await db.drop(); // idempotent
  const admin = await testCluster();
  const { rowCount } = await admin.pool.query("select 1 from pg_database where datname = $1", [name]);
  assert.equal(rowCount, 0);
});

test("an empty test database has no schema", async (t) => {
  const db = await createTestDatabase({ empty: true });
  t.after(() => db.drop());
  const { rows } = await db.pool.query<{ t: string | null }>("select to_regclass('schema_migrations')::text as t");
  assert.deepEqual(rows, [{ t: null }]);
});

test("a template built from other migration files is rebuilt; a current one is reused", async (t) => {
  const admin = await testCluster();
  const name = `flowsvc_template_${randomBytes(4).toString("hex")}`;
  t.after(() => admin.pool.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`));

  assert.deepEqual(await ensureTemplateDatabase(admin, name), { rebuilt: true });
  assert.deepEqual(await ensureTemplateDatabase(admin, name), { rebuilt: false });

  // As if the template had been built by a checkout with fewer migrations.
  await admin.pool.query(`comment on database ${pg.escapeIdentifier(name)} is 'flowsvc migrations 0 stale'`);
  assert.deepEqual(await ensureTemplateDatabase(admin, name), { rebuilt: true });

  const clone = `test_${randomBytes(4).toString("hex")}`;
  await admin.pool.query(`create database ${pg.escapeIdentifier(clone)} template ${pg.escapeIdentifier(name)}`);
  t.after(() => admin.pool.query(`drop database if exists ${pg.escapeIdentifier(clone)} with (force)`));
  const url = new URL(admin.url);
  url.pathname = `/${clone}`;
  const client = new pg.Client(url.toString());
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>("select count(*)::int as n from schema_migrations");
    assert.equal(rows[0]?.n, (await listMigrations()).length);
  } finally {
    await client.end();
  }
});
