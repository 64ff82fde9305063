/**
 * What a pipeline run (`flowsvc/pipeline/v1`) has beside a graph run, written in its creating
 * transaction by each of its three creators (a submit, a `--as yaml` handler's delivery, `flow spawn
 * --as pipeline`): the graph it compiled to (`runs.graph`, what the graph driver runs; the run's
 * `source` stays the YAML), its `cancel_on` types, its job-level concurrency groups, and its place
 * in its workflow-level group. Migration 017.
 */
import type { PoolClient } from "pg";
import { graphDocumentText } from "@flowsvc/core";
import { jobGroupsOf, type CompiledPipeline, type RunGroup } from "@flowsvc/core/pipeline";
import { cancelRun } from "./cancel.js";
import { joinRunGroup } from "./locks.js";

/** The substate of a run or node held in a concurrency group's queue (`flow status`: `<group> (concurrency)`). */
export const concurrencySubstate = (group: string): { name: string; kind: "concurrency" } => ({ name: group, kind: "concurrency" });

export interface PipelineRunSetup {
  runId: string;
  projectId: string;
  pipeline: Pick<CompiledPipeline, "graph" | "cancel_on" | "jobs">;
  /** The workflow-level group, its name worked out for this run (core's runGroupOf). */
  group: RunGroup | undefined;
  publicUrl: string | undefined;
}

/**
 * The compiled graph, `cancel_on` and job groups of a new pipeline run, then its workflow group:
 * with `cancel-running` the group's other runs are cancelled; a run not granted the lease stays
 * queued with the substate naming its group until a release grants it (the driver starts it then).
 */
export const setupPipelineRun = async (tx: PoolClient, s: PipelineRunSetup): Promise<void> => {
  const jobGroups = jobGroupsOf(s.pipeline.jobs);
  await tx.query(`update runs set graph = $2, cancel_on = $3, job_groups = $4 where id = $1`, [
    s.runId,
    graphDocumentText(s.pipeline.graph),
    s.pipeline.cancel_on.length > 0 ? s.pipeline.cancel_on : null,
    jobGroups.length > 0 ? JSON.stringify(jobGroups) : null,
  ]);
  const group = s.group;
  if (!group) return;
  const granted = await joinRunGroup(tx, {
    projectId: s.projectId,
    runId: s.runId,
    grp: group.name,
    cancelRunning: group.cancelRunning,
    cancel: (id) => cancelRun(tx, id, `concurrency: a newer run of group ${group.name} started (${s.runId})`, s.publicUrl),
  });
  if (!granted)
    await tx.query(`update runs set substate = $2 where id = $1 and status = 'queued'`, [
      s.runId,
      JSON.stringify(concurrencySubstate(group.name)),
    ]);
};
