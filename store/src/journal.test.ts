import { test } from "node:test";
import assert from "node:assert/strict";
import { claimReadyJobs } from "./jobs.js";
import { recordJournalForToken } from "./journal.js";
import { mintToken } from "./mint.js";
import { createTestDatabase, createTestProject, createTestRun } from "./testing.js";

test("a step's record takes no lock on its run (migration 025), and a run's deletion still deletes its journal", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const { projectId } = await createTestProject(db.pool);
  const runId = await createTestRun(db.pool, projectId);
  const digest = mintToken("job").digest;
  await claimReadyJobs(db.pool, { limit: 1, leaseMs: 60_000, capabilities: [], mintDigest: () => digest });
  const step = { kind: "step" as const, name: "build", ordinal: 0, status: "done" as const, result: { stdout_b64: "aGkK", exit: 0 } };

  // The record's transaction leaves the run row unlocked: another session can take it for update at once.
  const tx = await db.pool.connect();
  try {
    await tx.query("begin");
    assert.ok(await recordJournalForToken(tx, { digest, runId }, { ...step, position: 0 }));
    const other = await db.pool.query<{ id: string }>("select id from runs where id = $1 for update nowait", [runId]);
    assert.equal(other.rows[0]?.id, runId);
    await tx.query("commit");
  } finally {
    tx.release();
  }

  // A lost token records nothing; a taken position neither (the long way tells them apart).
  assert.equal(await recordJournalForToken(db.pool, { digest: mintToken("job").digest, runId }, { ...step, position: 1 }), undefined);
  assert.equal(await recordJournalForToken(db.pool, { digest, runId }, { ...step, position: 0 }), undefined);

  const journalRows = async (): Promise<number> =>
    Number((await db.pool.query<{ n: string }>("select count(*) as n from journal where run_id = $1", [runId])).rows[0]!.n);
  assert.equal(await journalRows(), 1);
  await db.pool.query("delete from projects where id = $1", [projectId]);
  assert.equal(await journalRows(), 0, "the run's deletion (its project's cascade) deleted its journal rows (migration 025's trigger)");
});
