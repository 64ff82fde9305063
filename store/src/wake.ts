import type { Pool, PoolClient } from "pg";
import { EXPIRED_RESULTS, decideSuspend, isGraphEngineWorkflow, isTerminalStatus, substateOf, wakeAction } from "@flowsvc/core";
import { mintId } from "./mint.js";
import { PENDING } from "./journal-entries.js";
import { notifyGraph } from "./graph-runs.js";

export { substateOf };

/**
 * Waking and parking runs. Every path that resolves a wait (timer, signal, lease grant, child
 * completion) calls `wakeRun` inside its transaction; `suspendJob` is the agent's side. Both lock
 * the run row first, so a wait that resolves while the agent is still winding down is never lost:
 * the flag `wake_requested` turns the coming suspend into a requeue. What to do (queue, flag,
 * park, requeue, which result a due wait gets) is decided by core's waits.ts; the SQL here does
 * the locking and the writes.
 */
/**
 * The one way a run gets its next job (wake, requeue at suspend, policy retry): a queued job that
 * needs the capabilities the run's first job needed (a handler run keeps needing `polyglot`), and
 * the run back in `queued`. The caller holds the run row's lock.
 */
export const queueRunJob = async (tx: PoolClient, runId: string, delayMs = 0): Promise<void> => {
  await tx.query(
    `insert into jobs (id, run_id, status, kind, capabilities, not_before)
     select $1, $2, 'queued', 'run',
            coalesce((select capabilities from jobs where run_id = $2 and kind = 'run' order by created_at limit 1), '{}'),
            now() + ($3::int * interval '1 millisecond')`,
    [mintId("job"), runId, delayMs],
  );
  await tx.query(`update runs set status = 'queued', wake_requested = false where id = $1`, [runId]);
  await tx.query(`select pg_notify('flowsvc_jobs', $1)`, [runId]);
};

export const wakeRun = async (tx: PoolClient, runId: string): Promise<"queued" | "flagged" | "none"> => {
  const { rows } = await tx.query<{ status: string; workflow: string }>(`select status, workflow from runs where id = $1 for update`, [
    runId,
  ]);
  // A graph or pipeline run has no script to requeue: its driver takes the resolved wait as its parked node's end.
  if (isGraphEngineWorkflow(rows[0]?.workflow)) {
    await notifyGraph(tx, runId);
    return "queued";
  }
  const action = wakeAction(rows[0]?.status);
  if (action === "queue") {
    await queueRunJob(tx, runId);
    return "queued";
  }
  if (action === "flag") {
    await tx.query(`update runs set wake_requested = true where id = $1`, [runId]);
    return "flagged";
  }
  return "none";
};

interface PendingRow {
  kind: string;
  name: string;
  position: number;
  deadline: Date | null;
}

/** A due wait's result, by its kind (core's expiredResult): `$n::jsonb -> kind` in the updates below. */
const EXPIRED_JSON = JSON.stringify(EXPIRED_RESULTS);

/**
 * The agent of `jobId` ended its script because a call is waiting: park the run until a wait
 * resolves, or requeue it at once when one already resolved while the job was winding down.
 */
export const suspendJob = async (tx: PoolClient, jobId: string, runId: string): Promise<"parked" | "requeued"> => {
  const { rows: runRows } = await tx.query<{ wake_requested: boolean; status: string }>(
    `select wake_requested, status from runs where id = $1 for update`,
    [runId],
  );
  await tx.query(`update jobs set status = 'suspended', token_digest = null, lease_expires_at = null, updated_at = now() where id = $1`, [
    jobId,
  ]);
  const run = runRows[0];
  if (!run || isTerminalStatus(run.status)) return "parked";
  // A wait already due (a zero-length sleep, a bounded wait past its deadline) resolves now
  // instead of at the timer loop's next tick.
  const { rowCount: due } = await tx.query(
    `update journal set status = 'done', resolved_at = now(), result = $2::jsonb -> kind
      where run_id = $1 and status = $3 and deadline <= now()`,
    // `pending` as a parameter, here and below: the run's entries by primary key, never every
    // pending wait of every run (journal-entries.ts PENDING).
    [runId, EXPIRED_JSON, PENDING],
  );
  const { rows: pending } = await tx.query<PendingRow>(
    `select kind, name, position, deadline from journal where run_id = $1 and status = $2 order by position desc`,
    [runId, PENDING],
  );
  const decision = decideSuspend({
    wakeRequested: run.wake_requested,
    resolvedDue: due ?? 0,
    pending: pending.map((p) => ({ ...p, deadlineMs: p.deadline?.getTime() ?? null })),
  });
  if (decision.type === "requeue") {
    await queueRunJob(tx, runId);
    return "requeued";
  }
  const deadline = decision.deadlineMs === null ? null : new Date(decision.deadlineMs);
  await tx.query(`update runs set status = 'parked', substate = $2, deadline = $3 where id = $1`, [runId, decision.substate, deadline]);
  await tx.query(`select pg_notify('flowsvc_runs', $1)`, [runId]);
  return "parked";
};

/** Pending waits whose deadline passed: (run, position) pairs for the timer loop. */
export const dueWaits = async (tx: PoolClient | Pool, limit = 500): Promise<Array<{ run_id: string; position: number }>> => {
  const { rows } = await tx.query<{ run_id: string; position: number }>(
    `select run_id, position from journal where status = 'pending' and deadline <= now() order by deadline limit $1`,
    [limit],
  );
  return rows;
};

/** Resolves one due wait: a sleep wakes with `{}`, a bounded wait times out with `{timed_out: true}`. */
export const resolveDueWait = async (tx: PoolClient, runId: string, position: number): Promise<boolean> => {
  await tx.query(`select 1 from runs where id = $1 for update`, [runId]);
  const { rowCount } = await tx.query(
    `update journal set status = 'done', resolved_at = now(), result = $3::jsonb -> kind
      where run_id = $1 and position = $2 and status = $4 and deadline <= now()`,
    // `pending` as a parameter: by primary key, never every overdue wait (journal-entries.ts PENDING).
    [runId, position, EXPIRED_JSON, PENDING],
  );
  if ((rowCount ?? 0) === 0) return false;
  await wakeRun(tx, runId);
  return true;
};
