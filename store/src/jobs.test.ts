import { test } from "node:test";
import assert from "node:assert/strict";
import { claimReadyJobs, markJobRunning, requeueJobAttempt } from "./jobs.js";
import { mintToken } from "./mint.js";
import { createPool } from "./pool.js";
import { startJobAndRunTransaction } from "./run-lifecycle.js";
import { createTestDatabase, createTestProject, createTestRun } from "./testing.js";

test("a dispatch's asynchronous commit stays in its own statement: the pooled connection is durable again after it", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const { projectId } = await createTestProject(db.pool);
  const runId = await createTestRun(db.pool, projectId);
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

test("a claim read before its job was requeued takes nothing back: the start refuses the old token, and the new dispatch's claim starts the run once", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const { projectId } = await createTestProject(db.pool);
  const runId = await createTestRun(db.pool, projectId);
  const dispatch = async (): Promise<{ jobId: string; attempt: number; digest: Buffer }> => {
    const digest = mintToken("job").digest;
    const [job] = await claimReadyJobs(db.pool, { limit: 1, leaseMs: 60_000, capabilities: [], mintDigest: () => digest });
    assert.ok(job, "the run's job is dispatched");
    return { jobId: job.id, attempt: job.attempt, digest };
  };
  const state = async () =>
    (
      await db.pool.query<{ job: string; agent: string | null; run: string; started: number }>(
        `select j.status as job, j.agent_id as agent, r.status as run,
                (select count(*)::int from events e where e.source_run_id = r.id and e.type = 'run.started') as started
           from jobs j join runs r on r.id = j.run_id where r.id = $1`,
        [runId],
      )
    ).rows[0];
  const start = (digest: Buffer, jobId: string, agentId: string) =>
    startJobAndRunTransaction(db.pool, { jobId, digest, runId, agentId, leaseMs: 60_000, publicUrl: undefined, projectId });

  // The first agent's claim read its job; then the launcher saw that agent end and requeued the job.
  const first = await dispatch();
  assert.ok(await requeueJobAttempt(db.pool, first.jobId, first.attempt));
  assert.equal(await start(first.digest, first.jobId, "agt-gone"), false);
  assert.equal(await markJobRunning(db.pool, { jobId: first.jobId, digest: first.digest, agentId: "agt-gone", leaseMs: 60_000 }), false);
  assert.deepEqual(await state(), { job: "queued", agent: null, run: "queued", started: 0 }, "the stale claim changed nothing");

  // Dispatched again: the old token still takes nothing; the new one starts the run, once.
  const second = await dispatch();
  assert.equal(await start(first.digest, second.jobId, "agt-gone"), false);
  assert.deepEqual(await state(), { job: "dispatched", agent: null, run: "queued", started: 0 });
  assert.equal(await start(second.digest, second.jobId, "agt-new"), true);
  assert.deepEqual(await state(), { job: "running", agent: "agt-new", run: "running", started: 1 });
  // A re-claim with the live token (the agent asked again) keeps the job and starts nothing twice.
  assert.equal(await start(second.digest, second.jobId, "agt-new"), true);
  assert.deepEqual(await state(), { job: "running", agent: "agt-new", run: "running", started: 1 });
  // A hostile digest (empty, NUL bytes) matches no job.
  for (const digest of [Buffer.alloc(0), Buffer.alloc(32, 0)]) assert.equal(await start(digest, second.jobId, "agt-x"), false);
  assert.deepEqual(await state(), { job: "running", agent: "agt-new", run: "running", started: 1 });
});
