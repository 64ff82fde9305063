/**
 * A run's lifecycle, in one place: a job's claim starts the run (`startRunIfNeeded`), a script
 * job's finish ends it or retries it (`finishScriptJob`), an activity job's finish wakes its
 * parent (`finishActivityJob`), the dispatcher gives up on a job whose agents kept dying
 * (`giveUpJob`), and `completeRun` is the one way a run reaches a terminal status. Every state
 * change appends its `run.*` event in the caller's transaction.
 */
import type { PoolClient } from "pg";
import { FlowError, lifecyclePayload, trustOf, type LifecycleType, type ValueMasker } from "@flowsvc/core";
import { emitEvent } from "./emit.js";
import { findProjectById } from "./tenancy.js";
import { finishRun, getRunInternal, markRunRunning, appendAnnotation } from "./runs.js";
import { releaseRunLeases } from "./locks.js";
import { finishActivity, uncollectedActivities } from "./activities.js";
import { releaseSignalClaims } from "./signals.js";
import { queueRunJob } from "./wake.js";
import { appendLogs } from "./logs.js";

interface LifecycleEvent {
  runId: string;
  type: LifecycleType;
  extra: Record<string, unknown>;
  publicUrl: string | undefined;
}

/** Appends a `run.*` event for a run in the same transaction as the state change it reports. */
const emitLifecycle = async (db: PoolClient, { runId, type, extra, publicUrl }: LifecycleEvent): Promise<void> => {
  const run = await getRunInternal(db, runId);
  if (!run) return;
  const project = await findProjectById(db, run.project_id);
  const payload = lifecyclePayload({ ...run, org: project?.org ?? "", project: project?.project ?? "" }, extra, publicUrl);
  // Lifecycle events carry the finishing run's subject and its trust, and are delivered like any event.
  const key = typeof run.trigger["key"] === "string" ? run.trigger["key"] : null;
  await emitEvent(db, { projectId: run.project_id, type, key, payload, sourceRunId: run.id, trusted: trustOf({ by: "run", run }), platform: true });
};

/** A job of the run was claimed: the run is running; the first time, `run.started` is appended. */
export const startRunIfNeeded = async (db: PoolClient, runId: string, publicUrl: string | undefined): Promise<void> => {
  if (await markRunRunning(db, runId)) await emitLifecycle(db, { runId, type: "run.started", extra: {}, publicUrl });
};

export type RunOutcome =
  | { status: "succeeded"; output: Record<string, unknown> }
  | { status: "failed"; error: string; output?: Record<string, unknown> }
  | { status: "cancelled"; reason: string };

/** The columns a terminal status writes, and the fields its `run.*` event adds. */
const outcomeColumns = (o: RunOutcome): { output: Record<string, unknown> | null; error: string | null; extra: Record<string, unknown> } => {
  switch (o.status) {
    case "succeeded":
      return { output: o.output, error: null, extra: { output: o.output } };
    case "failed":
      return { output: o.output ?? null, error: o.error, extra: { error: o.error } };
    case "cancelled":
      return { output: null, error: o.reason, extra: { reason: o.reason } };
  }
};

/** The run's activities nobody collected, as the annotation the finished run gets (undefined: none). */
const uncollectedNote = (unreported: ReadonlyArray<{ name: string; status: string; exit_code: number | null }>): string | undefined => {
  if (unreported.length === 0) return undefined;
  const list = unreported.map((a) => `\`${a.name}\` (${a.status}${a.exit_code === null ? "" : `, exit ${a.exit_code}`})`).join(", ");
  return `${unreported.length} ${unreported.length === 1 ? "activity was" : "activities were"} never collected: ${list}`;
};

/**
 * Ends a run with a terminal status: its leases are released, uncollected activities annotated,
 * and `run.<status>` appended. False (and no event) when the run had already ended.
 */
export const completeRun = async (db: PoolClient, runId: string, outcome: RunOutcome, publicUrl: string | undefined): Promise<boolean> => {
  await releaseRunLeases(db, runId);
  const note = uncollectedNote(await uncollectedActivities(db, runId));
  if (note !== undefined) await appendAnnotation(db, runId, note);
  const { output, error, extra } = outcomeColumns(outcome);
  if (!(await finishRun(db, runId, { status: outcome.status, output, error }))) return false;
  await emitLifecycle(db, { runId, type: `run.${outcome.status}`, extra, publicUrl });
  return true;
};

/**
 * A failed attempt of a run with a retry policy (`flow submit --retry`) starts over: the recorded
 * calls are purged, the signals it took are queued again, its leases are released and its
 * activities forgotten; the next attempt is queued after the backoff. Returns false when no
 * attempt is left (the caller then fails the run).
 */
export const retryIfAllowed = async (db: PoolClient, runId: string, jobId: string, error: string): Promise<boolean> => {
  const { rows } = await db.query<{ retry: { attempts: number; backoff_ms: number } | null; attempt: number }>(
    `select retry, attempt from runs where id = $1 for update`,
    [runId],
  );
  const r = rows[0];
  if (!r?.retry || r.attempt >= r.retry.attempts) return false;
  await db.query(`delete from journal where run_id = $1`, [runId]);
  await releaseSignalClaims(db, runId);
  await releaseRunLeases(db, runId);
  await db.query(`delete from jobs where run_id = $1 and kind = 'activity' and status = 'queued'`, [runId]);
  await db.query(`delete from activities where run_id = $1`, [runId]);
  await db.query(`update runs set attempt = attempt + 1, error = $2, substate = null, deadline = null where id = $1`, [runId, error]);
  await queueRunJob(db, runId, r.retry.backoff_ms);
  const note = `flowsvc: attempt ${r.attempt} of ${r.retry.attempts} failed (${error}); attempt ${r.attempt + 1} starts in ${r.retry.backoff_ms} ms\n`;
  await appendLogs(db, runId, jobId, [{ stream: "system", data: note }]);
  return true;
};

/**
 * A live job (dispatched or running) is done: its token dies with it. False when it was not live
 * any more (finished already, or taken over): the caller must not end its run a second time.
 */
const endLiveJob = async (tx: PoolClient, jobId: string): Promise<boolean> => {
  const { rowCount } = await tx.query(
    `update jobs set status = 'done', token_digest = null, lease_expires_at = null, updated_at = now()
      where id = $1 and status in ('dispatched', 'running')`,
    [jobId],
  );
  return (rowCount ?? 0) > 0;
};

const jobEnded = (jobId: string): FlowError =>
  new FlowError("job_lost", `job ${jobId} has already finished, or was dispatched again: its finish is not taken twice`);

export interface ScriptJobFinish {
  job: { id: string; run_id: string };
  exitCode: number;
  /** The script's outputs (`flow output`), as the agent sent them: masked here before they are stored. */
  outputs: Record<string, string>;
  /** The agent's error text, if any: masked here; a nonzero exit without one says the exit code. */
  error?: string | undefined;
  durationMs: number;
  /** The run's project's secret values: outputs and error are stored, and reach the `run.*` events, masked. */
  masker: Pick<ValueMasker, "text" | "json">;
  publicUrl: string | undefined;
}

export type ScriptJobStatus = "succeeded" | "retrying" | "failed";

/**
 * The agent finished a run's script job (POST /agent/v1/finish): exit 0 succeeds the run; a
 * nonzero exit retries it while its retry policy has attempts left, else fails it. A job that is
 * no longer live (a second finish) is refused with `job_lost` and changes nothing.
 */
export const finishScriptJob = async (tx: PoolClient, f: ScriptJobFinish): Promise<ScriptJobStatus> => {
  if (!(await endLiveJob(tx, f.job.id))) throw jobEnded(f.job.id);
  const runId = f.job.run_id;
  if (f.exitCode === 0) {
    const output = { ...(f.masker.json(f.outputs) as Record<string, string>), exit_code: 0, duration_ms: f.durationMs };
    await completeRun(tx, runId, { status: "succeeded", output }, f.publicUrl);
    return "succeeded";
  }
  const error = f.masker.text(f.error ?? `the script exited with code ${f.exitCode}`);
  if (await retryIfAllowed(tx, runId, f.job.id, error)) return "retrying";
  await completeRun(tx, runId, { status: "failed", error, output: { exit_code: f.exitCode, duration_ms: f.durationMs } }, f.publicUrl);
  return "failed";
};

/**
 * The agent finished an activity child's job (POST /agent/v1/finish-activity): the child is
 * recorded and its parent's waits on it resolve. `outcome` comes sealed and masked by the caller.
 * A second finish is refused with `job_lost`.
 */
export const finishActivityJob = async (
  tx: PoolClient,
  f: { job: { id: string }; activityId: string; outcome: { exit_code: number; stdout_b64: string; error?: string | undefined } },
): Promise<"succeeded" | "failed"> => {
  if (!(await endLiveJob(tx, f.job.id))) throw jobEnded(f.job.id);
  await finishActivity(tx, f.activityId, f.outcome);
  return f.outcome.exit_code === 0 ? "succeeded" : "failed";
};

/**
 * The dispatcher gives up on a job whose agents kept dying (dispatched `attempts` times, never
 * finished): an activity child fails (its parent decides), a script run fails. Returns the error
 * recorded, or undefined when the job was no longer live.
 */
export const giveUpJob = async (
  tx: PoolClient,
  g: { job: { id: string; run_id: string; kind: string; activity_id: string | null }; attempts: number; publicUrl: string | undefined },
): Promise<string | undefined> => {
  const error = `the job was dispatched ${g.attempts} times and no agent finished it`;
  if (!(await endLiveJob(tx, g.job.id))) return undefined;
  if (g.job.kind === "activity" && g.job.activity_id) await finishActivity(tx, g.job.activity_id, { exit_code: 1, stdout_b64: "", error });
  else await completeRun(tx, g.job.run_id, { status: "failed", error }, g.publicUrl);
  return error;
};
