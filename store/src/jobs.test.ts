import { test } from "node:test";
import assert from "node:assert/strict";
import { claimReadyJobs } from "./jobs.js";
import { mintId, mintToken } from "./mint.js";
import { createPool, withTransaction } from "./pool.js";
import { createRun } from "./run-lifecycle.js";
import { createTestDatabase, createTestProject } from "./testing.js";

test("a dispatch's asynchronous commit stays in its own statement: the pooled connection is durable again after it", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const { projectId } = await createTestProject(db.pool);
  const runId = mintId("run");
  await withTransaction(db.pool, (tx) =>
    createRun(tx, { id: runId, projectId, source: "true\n", filename: "t.sh", trusted: true, trigger: { type: "manual", sender: "test" } }),
  );
  // One connection: whatever the claim set on it, the next statement sees.
  const pool = createPool(db.url, { max: 1 });
  t.after(() => pool.end());
  // The test cluster commits asynchronously throughout; this session is made durable first.
  await pool.query("set synchronous_commit = on");
  const digest = mintToken("job").digest;
  const claimed = await claimReadyJobs(pool, { limit: 2, leaseMs: 1000, capabilities: [], mintDigest: () => digest });
  assert.deepEqual(
    claimed.map((j) => j.run_id),
    [runId],
  );
  assert.deepEqual((await pool.query("show synchronous_commit")).rows, [{ synchronous_commit: "on" }]);
  // The dispatch is committed: another connection sees it.
  const { rows } = await db.pool.query<{ status: string; token_digest: Buffer }>(
    `select status, token_digest from jobs where run_id = $1`,
    [runId],
  );
  assert.equal(rows[0]?.status, "dispatched");
  assert.deepEqual(rows[0]?.token_digest, digest);
  // Nothing ready: nothing claimed, and the connection is still durable.
  assert.deepEqual(
    await claimReadyJobs(pool, { limit: 2, leaseMs: 1000, capabilities: [], mintDigest: () => mintToken("job").digest }),
    [],
  );
  assert.deepEqual((await pool.query("show synchronous_commit")).rows, [{ synchronous_commit: "on" }]);
});
