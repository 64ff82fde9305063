import type { PoolClient } from "pg";
import { lifecyclePayload, type LifecycleType } from "@flowsvc/core";
import { appendEvent } from "./events.js";
import { mintId } from "./mint.js";
import { findProjectById } from "./tenancy.js";
import { finishRun, getRunInternal, markRunRunning } from "./runs.js";

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
  const key = typeof run.trigger["key"] === "string" ? run.trigger["key"] : null;
  await appendEvent(db, { id: mintId("evt"), projectId: run.project_id, type, key, payload, sourceRunId: run.id, generation: 0 });
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
  const output = outcome.status === "cancelled" ? null : (outcome.output ?? null);
  const error = outcome.status === "failed" ? outcome.error : outcome.status === "cancelled" ? outcome.reason : null;
  if (!(await finishRun(db, runId, outcome.status, output, error))) return false;
  const extra =
    outcome.status === "succeeded" ? { output: outcome.output } : outcome.status === "failed" ? { error: outcome.error } : { reason: outcome.reason };
  await emitLifecycle(db, runId, `run.${outcome.status}`, extra, publicUrl);
  return true;
};
