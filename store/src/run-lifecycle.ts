import type { PoolClient } from "pg";
import { lifecyclePayload, trustOf, type LifecycleType } from "@flowsvc/core";
import { emitEvent } from "./emit.js";
import { findProjectById } from "./tenancy.js";
import { finishRun, getRunInternal, markRunRunning, appendAnnotation } from "./runs.js";
import { releaseRunLeases } from "./locks.js";
import { uncollectedActivities } from "./activities.js";
import { releaseSignalClaims } from "./signals.js";
import { queueRunJob } from "./wake.js";
import { appendLogs } from "./logs.js";

/** Appends a `run.*` event for a run in the same transaction as the state change it reports. */
const emitLifecycle = async (
  db: PoolClient,
  runId: string,
  type: LifecycleType,
  extra: Record<string, unknown>,
  publicUrl: string | undefined,
): Promise<void> => {
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
  if (await markRunRunning(db, runId)) await emitLifecycle(db, runId, "run.started", {}, publicUrl);
};

export const completeRun = async (
  db: PoolClient,
  runId: string,
  outcome: { status: "succeeded"; output: Record<string, unknown> } | { status: "failed"; error: string; output?: Record<string, unknown> } | { status: "cancelled"; reason: string },
  publicUrl: string | undefined,
): Promise<boolean> => {
  await releaseRunLeases(db, runId);
  const unreported = await uncollectedActivities(db, runId);
  if (unreported.length > 0) {
    const list = unreported.map((a) => `\`${a.name}\` (${a.status}${a.exit_code === null ? "" : `, exit ${a.exit_code}`})`).join(", ");
    await appendAnnotation(db, runId, `${unreported.length} ${unreported.length === 1 ? "activity was" : "activities were"} never collected: ${list}`);
  }
  const output = outcome.status === "cancelled" ? null : (outcome.output ?? null);
  const error = outcome.status === "failed" ? outcome.error : outcome.status === "cancelled" ? outcome.reason : null;
  if (!(await finishRun(db, runId, outcome.status, output, error))) return false;
  const extra =
    outcome.status === "succeeded" ? { output: outcome.output } : outcome.status === "failed" ? { error: outcome.error } : { reason: outcome.reason };
  await emitLifecycle(db, runId, `run.${outcome.status}`, extra, publicUrl);
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
