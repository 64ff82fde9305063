/**
 * What the approvals route (ingest/src/routes/approvals.ts) reads of a graph run's gates: the run
 * and the gate's node row, locked in that order (every path takes the run row first), whether an
 * answer to the gate's current wait was already sent, and the gates a run is parked on.
 */
import type { Pool, PoolClient } from "pg";

export interface GateRow {
  node_id: string;
  type: string;
  status: string;
  /** The engine's record of the wait: `{name, kind}`, plus the evaluated `prompt` and `fields` of an approval. */
  substate: { fields?: unknown; prompt?: unknown; deadline_ms?: unknown; [k: string]: unknown } | null;
  started_at: Date | null;
}

/** The run of a project, locked, with its workflow and the graph document the engine runs (as `source`); undefined when the project has no such run. */
export const lockRunForGate = async (
  tx: PoolClient,
  projectId: string,
  runId: string,
): Promise<{ workflow: string; status: string; source: string } | undefined> => {
  const { rows } = await tx.query<{ workflow: string; status: string; source: string }>(
    `select workflow, status, coalesce(graph, source) as source from runs where id = $1 and (project_id = $2) is true for update`,
    // `(project_id = $2) is true`: the same test in a form no index serves, so the run is found by
    // primary key. As `project_id = $2`, the generic plan made while runs is small (a new server's
    // connections keep it) chose runs_project_created and read every run of the project per call.
    [runId, projectId],
  );
  return rows[0];
};

/** One node of a graph run, locked (after its run). */
export const lockGateNode = async (tx: PoolClient, runId: string, nodeId: string): Promise<GateRow | undefined> => {
  const { rows } = await tx.query<GateRow>(
    `select node_id, type, status, substate, started_at from graph_nodes where run_id = $1 and node_id = $2 for update`,
    [runId, nodeId],
  );
  return rows[0];
};

/** Who sent the first signal named `name` to the run since `since` (the gate's park); undefined when none was. */
export const gateAnsweredBy = async (
  tx: PoolClient,
  runId: string,
  name: string,
  since: Date | null,
): Promise<{ sentBy: string | null } | undefined> => {
  const { rows } = await tx.query<{ sent_by: string | null }>(
    `select sent_by from signals where run_id = $1 and name = $2 and created_at >= coalesce($3, '-infinity'::timestamptz) order by id limit 1`,
    [runId, name, since],
  );
  return rows[0] ? { sentBy: rows[0].sent_by } : undefined;
};

/** The approval nodes a run is parked on, in document order, with the run's graph document as `source` (for their declared fields). */
export const parkedGates = async (db: Pool | PoolClient, runId: string): Promise<Array<GateRow & { source: string }>> => {
  const { rows } = await db.query<GateRow & { source: string }>(
    `select g.node_id, g.type, g.status, g.substate, g.started_at, coalesce(r.graph, r.source) as source
       from graph_nodes g join runs r on r.id = g.run_id
      where g.run_id = $1 and g.type = 'approval' and g.status = 'parked' order by g.ord`,
    [runId],
  );
  return rows;
};
