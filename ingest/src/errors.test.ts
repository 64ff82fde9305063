import { test } from "node:test";
import assert from "node:assert/strict";
import { createPool, createTestDatabase, waitFor } from "@flowsvc/store";
import { toFlowError } from "./errors.js";

void test("regression (soak): Postgres's disk_full (53100) is a 503 that says the disk is full and nothing was recorded, not an internal 500", () => {
  // The shape pg gives a server error: a message and the SQLSTATE in `code`.
  const pgError = Object.assign(new Error('could not extend file "base/16384/2619": No space left on device'), { code: "53100" });
  const fe = toFlowError(pgError);
  assert.equal(fe.code, "unavailable");
  assert.match(fe.message, /^the database's disk is full: nothing was recorded$/);
  assert.match(fe.hint ?? "", /free space/);
  assert.equal(toFlowError(Object.assign(new Error("x"), { code: "23505" })).code, "internal", "other database errors stay internal");
});

void test("regression (soak): a statement whose Postgres connection was terminated is a 503 unavailable, not an internal 500", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const pool = createPool(db.url, { max: 1, applicationName: "errors-test" });
  t.after(() => pool.end());
  const client = await pool.connect();
  // Its rejection is watched from the start: it may come before pg_terminate_backend's own answer,
  // and a rejection nobody watches yet fails the test as unhandled.
  const inFlight = client.query("select pg_sleep(30)").then(
    () => assert.fail("the statement should have failed"),
    (err: unknown) => err,
  );
  await waitFor(
    "the statement to run",
    async () => (await db.pool.query("select 1 from pg_stat_activity where query = 'select pg_sleep(30)'")).rowCount === 1,
  );
  await db.pool.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'errors-test'");
  // The statement in flight gets Postgres's 57P01; the next one on that client, pg's own refusal.
  const terminated = await inFlight;
  const next = await client.query("select 1").then(
    () => assert.fail("the dead connection should refuse"),
    (err: unknown) => err,
  );
  client.release(true);
  for (const err of [terminated, next]) {
    const fe = toFlowError(err);
    assert.equal(fe.code, "unavailable", String(err));
    assert.equal(fe.message, "the server lost its connection to the database: the request may not have been recorded");
    assert.match(fe.hint ?? "", /send it again/);
  }
  assert.equal(toFlowError(Object.assign(new Error("x"), { code: "57014" })).code, "internal", "a cancelled statement stays internal");
});
