import { test } from "node:test";
import assert from "node:assert/strict";
import { createPool, endPool, withTransaction } from "./pool.js";
import { createTestDatabase, waitFor } from "./testing.js";

test("withTransaction commits what its function did and returns its value", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const id = await withTransaction(db.pool, async (client) => {
    await client.query("insert into orgs (id, name) values ('org-1', 'acme')");
    return "org-1";
  });
  assert.equal(id, "org-1");
  assert.deepEqual((await db.pool.query("select name from orgs")).rows, [{ name: "acme" }]);
});

test("withTransaction rolls back and rethrows when its function throws, and frees its client", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const pool = createPool(db.url, { max: 1 });
  t.after(() => pool.end());
  const boom = new Error("boom");
  await assert.rejects(
    withTransaction(pool, async (client) => {
      await client.query("insert into orgs (id, name) values ('org-1', 'acme')");
      throw boom;
    }),
    (err) => err === boom,
  );
  // With max 1, this would hang if the first client had not been released.
  const count = await withTransaction(
    pool,
    async (client) => (await client.query<{ n: number }>("select count(*)::int as n from orgs")).rows,
  );
  assert.deepEqual(count, [{ n: 0 }]);
  assert.equal(pool.totalCount, 1);
  assert.equal(pool.idleCount, 1);
});

test("a lost idle connection is logged and does not crash the process; the pool carries on", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const logged: string[] = [];
  const pool = createPool(db.url, { max: 2, applicationName: "pool-test", log: (m) => logged.push(m) });
  t.after(() => pool.end());
  await pool.query("select 1"); // leaves one idle client

  const gone = new Promise<void>((resolve) => pool.once("error", () => resolve()));
  await db.pool.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'pool-test'");
  await gone;
  assert.equal(logged.length, 1);
  assert.match(logged[0] ?? "", /^postgres pool: idle connection lost: /);
  assert.deepEqual((await pool.query("select 2 as two")).rows, [{ two: 2 }]);
});

test("a checked-out client whose backend is terminated fails its query, does not crash the process, and leaves the pool", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const pool = createPool(db.url, { max: 1, applicationName: "pool-busy-test" });
  t.after(() => pool.end());
  const terminate = (): Promise<unknown> =>
    db.pool.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'pool-busy-test'");

  // Busy: a statement in flight when the backend goes (a query's error, then the connection's end).
  const busy = await pool.connect();
  const ended = new Promise<void>((resolve) => busy.once("end", () => resolve()));
  const inFlight = busy.query("select pg_sleep(30)");
  await waitFor(
    "the statement to run",
    async () => (await db.pool.query("select 1 from pg_stat_activity where query = 'select pg_sleep(30)'")).rowCount === 1,
  );
  // Its rejection is watched before the termination: it may come before terminate()'s own answer,
  // and a rejection nobody has watched yet fails the test as unhandled.
  const refused = assert.rejects(inFlight, /terminating connection due to administrator command/);
  await terminate();
  await refused;
  await ended;
  busy.release();

  // Idle in a transaction the caller holds: nothing in flight; the next statement fails.
  const idle = await pool.connect();
  await idle.query("begin");
  const idleEnded = new Promise<void>((resolve) => idle.once("end", () => resolve()));
  await terminate();
  await idleEnded;
  await assert.rejects(idle.query("select 1"), /not queryable|Connection terminated/);
  idle.release();

  // With max 1, this answers only if release() dropped the dead clients.
  assert.deepEqual((await pool.query("select 3 as three")).rows, [{ three: 3 }]);
});

test("endPool answers once every connection it held has closed, so a Postgres stopped next terminates none of them", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const name = `pool-end-${process.pid}`;
  const logged: string[] = [];
  const pool = createPool(db.url, { max: 4, applicationName: name, log: (m) => logged.push(m) });
  await Promise.all(Array.from({ length: 4 }, () => pool.query("select pg_sleep(0.01)")));
  assert.equal(pool.totalCount, 4);
  // pg-pool emits 'remove' once a client's connection has ended (its socket closed).
  let closed = 0;
  pool.on("remove", () => closed++);
  await endPool(pool);
  assert.equal(closed, 4, "endPool answered before every connection had closed");
  // pool.end() alone answers while the backends are still there (it has only asked its clients to end).
  const { rows } = await db.pool.query<{ n: number }>("select count(*)::int as n from pg_stat_activity where application_name = $1", [
    name,
  ]);
  assert.equal(rows[0]!.n, 0);
  assert.deepEqual(logged, []);
  await endPool(createPool(db.url, { applicationName: `${name}-unused` })); // a pool that never connected answers at once
});
