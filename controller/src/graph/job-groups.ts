/**
 * A pipeline job's `concurrency: {group, policy}` in the graph driver (issue 11; README
 * "Pipelines"). A job takes its group's lease before its first node starts, on the lease table
 * `flow lock` uses (store's joinRunGroup, at the job's own position: core's JobGroup order), and
 * lets go when its last node has ended (or its run has). Leases are per run: two jobs of one run
 * in one group do not exclude each other. `queue` waits FIFO: the job's first node is parked with
 * the group as its substate (the run shows it while nothing else of it runs) until a release grants
 * the lease and wakes the run. `cancel-running` cancels every other run holding or waiting for the
 * group through a concurrency group (the older run is superseded, as GitHub Actions cancels the run
 * whose job `cancel-in-progress` cancelled); a script's `flow lock` is never cancelled.
 */
import type { PoolClient } from "pg";
import { FlowError, type GraphScope } from "@flowsvc/core";
import { concurrencyGroupName, type JobGroup } from "@flowsvc/core/pipeline";
import {
  cancelRun,
  concurrencySubstate,
  jobGroupPosition,
  joinRunGroup,
  leaseAt,
  releaseLeaseAt,
  updateGraphNode,
  type GraphNodeRow,
  type GraphRunRow,
} from "@flowsvc/store";

const TERMINAL: ReadonlySet<string> = new Set(["success", "failed", "skipped", "cancelled"]);

/** What the driver does with a node that is ready to start. */
export type JobGroupGate = { kind: "start" } | { kind: "wait" } | { kind: "error"; error: string };

const START: JobGroupGate = { kind: "start" };

const groupStartingAt = (run: GraphRunRow, nodeId: string): { group: JobGroup; index: number } | undefined => {
  const index = (run.job_groups ?? []).findIndex((g) => g.nodes[0] === nodeId);
  return index === -1 ? undefined : { group: run.job_groups![index]!, index };
};

/** The group's name for this run, or why it has none (the node then fails). */
const nameOf = (group: JobGroup, scope: GraphScope): { name: string } | { error: string } => {
  try {
    return { name: concurrencyGroupName(group, scope, { field: `jobs.${group.job}.concurrency.group` }) };
  } catch (error) {
    if (error instanceof FlowError) return { error: error.message };
    throw error;
  }
};

/**
 * Before a ready node starts (its `if` passed): the first node of a job with a group takes the
 * group's lease. `start` when the lease is held (or the node needs none); `wait` when the job is
 * queued behind the group (the node is parked here); `error` when the group's name does not evaluate.
 */
export const takeJobGroup = async (
  tx: PoolClient,
  g: { run: GraphRunRow; nodeId: string; scope: GraphScope; publicUrl: string | undefined },
): Promise<JobGroupGate> => {
  const found = groupStartingAt(g.run, g.nodeId);
  if (!found) return START;
  const position = jobGroupPosition(found.index);
  const lease = await leaseAt(tx, g.run.id, position);
  if (lease.state === "held" || lease.state === "released") return START;
  let name = lease.grp;
  if (lease.state === "none") {
    const named = nameOf(found.group, g.scope);
    if ("error" in named) return { kind: "error", error: named.error };
    const grp = named.name;
    name = grp;
    const granted = await joinRunGroup(tx, {
      projectId: g.run.project_id,
      runId: g.run.id,
      grp,
      cancelRunning: found.group.policy === "cancel-running",
      position,
      cancel: (id) =>
        cancelRun(tx, id, `concurrency: job ${found.group.job} of a newer run of group ${grp} started (${g.run.id})`, g.publicUrl),
    });
    if (granted) return START;
  }
  await updateGraphNode(tx, g.run.id, g.nodeId, {
    status: "parked",
    mode: "wait",
    owner: null,
    substate: { ...concurrencySubstate(name ?? ""), job: found.group.job },
  });
  return { kind: "wait" };
};

/** Jobs whose group's lease was granted since their first node parked: the node is pending again, and this advance starts it. */
export const resumeGrantedJobs = async (tx: PoolClient, run: GraphRunRow, rows: readonly GraphNodeRow[]): Promise<boolean> => {
  let resumed = false;
  for (const [index, group] of (run.job_groups ?? []).entries()) {
    const first = rows.find((r) => r.node_id === group.nodes[0]);
    if (first?.status !== "parked" || first.substate?.kind !== "concurrency") continue;
    if ((await leaseAt(tx, run.id, jobGroupPosition(index))).state !== "held") continue;
    await updateGraphNode(tx, run.id, first.node_id, { status: "pending", mode: null, substate: null });
    resumed = true;
  }
  return resumed;
};

/** Jobs that have ended (their last node is terminal) let go of their group: the group's next waiting job or run is granted. */
export const releaseEndedJobs = async (tx: PoolClient, run: GraphRunRow, rows: readonly GraphNodeRow[]): Promise<void> => {
  for (const [index, group] of (run.job_groups ?? []).entries()) {
    const last = rows.find((r) => r.node_id === group.nodes.at(-1));
    if (last && TERMINAL.has(last.status)) await releaseLeaseAt(tx, run.id, jobGroupPosition(index));
  }
};
