/**
 * Graph runs in Postgres (migration 010): each node's state, the agent jobs of code and shell
 * nodes, and the one rule a finished attempt goes through (`settleGraphNode`: success, a retry
 * after its backoff, or failure). Every write happens under the run row's lock (the caller's
 * transaction holds it, `lockGraphRun`), and every change that may let the graph move on notifies
 * `flowsvc_graphs` with the run id: the controller's graph driver advances the run on it.
 */
import type { Pool, PoolClient } from "pg";
import {
  FlowError,
  GRAPH_ENGINE_WORKFLOWS_SQL,
  LIVE_STATUSES_SQL,
  assertStorableJson,
  formatDuration,
  type GraphScope,
  type ValueMasker,
} from "@flowsvc/core";
import type { JobGroup } from "@flowsvc/core/pipeline";
import type { Keyring } from "./keyring.js";
import { mintId } from "./mint.js";
import { openNodeOutput, sealNodeOutput, type JournalSealScope } from "./sealed-journal.js";

type Db = Pool | PoolClient;

/** A graph run's `runs.workflow` (core's; whether a run is the graph engine's is core's `isGraphEngineWorkflow`). */
export { GRAPH_WORKFLOW } from "@flowsvc/core";
/** The NOTIFY channel the graph driver listens on; the payload is the run id. */
export const GRAPH_CHANNEL = "flowsvc_graphs";
/** A code/shell node's output keeps at most this much of the script's stdout (the tail). */
export const NODE_STDOUT_LIMIT = 16 * 1024;

export type GraphNodeStatus = "pending" | "running" | "parked" | "success" | "failed" | "skipped" | "cancelled";
export const TERMINAL_NODE_STATUSES: readonly GraphNodeStatus[] = ["success", "failed", "skipped", "cancelled"];

/** What `flow status` / `flow steps` and the approvals route read of a node (the contract's getGraphRunNodes). */
export interface GraphNodeView {
  node_id: string;
  type: string;
  status: GraphNodeStatus;
  attempt: number;
  output: unknown;
  error: string | null;
  substate: { name: string; kind: string; [k: string]: unknown } | null;
  started_at: string | null;
  finished_at: string | null;
}

/** A node row as the driver needs it. */
export interface GraphNodeRow {
  node_id: string;
  type: string;
  ord: number;
  status: GraphNodeStatus;
  attempt: number;
  retry: { attempts: number; backoff_ms: number } | null;
  not_before: Date | null;
  /** As stored: masked (migration 030); the exact output is in `output_sealed` when masking changed it. */
  output: unknown;
  /** The exact output, sealed (base64), when it differs from the masked `output`; null otherwise and in older rows. */
  output_sealed: string | null;
  error: string | null;
  mode: "inline" | "job" | "child" | "wait" | null;
  owner: string | null;
  job_id: string | null;
  child_run_id: string | null;
  wait_position: number | null;
  substate: GraphNodeView["substate"];
}

const ROW_COLUMNS =
  "node_id, type, ord, status, attempt, retry, not_before, output, output_sealed, error, mode, owner, job_id, child_run_id, wait_position, substate";

export const notifyGraph = async (db: Db, runId: string): Promise<void> => {
  await db.query(`select pg_notify('${GRAPH_CHANNEL}', $1)`, [runId]);
};

/** A new graph run's nodes, all pending, and its input, in the transaction that created the run. */
export const insertGraphNodes = async (
  tx: PoolClient,
  runId: string,
  g: { nodes: ReadonlyArray<{ id: string; type: string; retry?: { attempts: number; backoff_ms: number } | undefined }>; input: unknown },
): Promise<void> => {
  await tx.query(`update runs set input = $2 where id = $1`, [runId, JSON.stringify(g.input ?? null)]);
  await tx.query(
    `insert into graph_nodes (run_id, node_id, type, ord, retry)
     select $1, n.id, n.type, n.ord - 1, n.retry from unnest($2::text[], $3::text[], $4::jsonb[]) with ordinality as n(id, type, retry, ord)`,
    [runId, g.nodes.map((n) => n.id), g.nodes.map((n) => n.type), g.nodes.map((n) => (n.retry ? JSON.stringify(n.retry) : null))],
  );
  await notifyGraph(tx, runId);
};

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** The contract's store API: every node of a graph run, in document order (empty for a script run). */
export const getGraphRunNodes = async (db: Db, runId: string): Promise<GraphNodeView[]> => {
  const { rows } = await db.query<
    Omit<GraphNodeView, "started_at" | "finished_at"> & { started_at: Date | null; finished_at: Date | null }
  >(
    `select node_id, type, status, attempt, output, error, substate, started_at, finished_at from graph_nodes where run_id = $1 order by ord`,
    [runId],
  );
  return rows.map((r) => ({ ...r, started_at: iso(r.started_at), finished_at: iso(r.finished_at) }));
};

/** The run's node rows, locked (the caller holds the run row's lock first: every path takes run, then nodes). */
export const lockGraphNodes = async (tx: PoolClient, runId: string): Promise<GraphNodeRow[]> => {
  const { rows } = await tx.query<GraphNodeRow>(`select ${ROW_COLUMNS} from graph_nodes where run_id = $1 order by ord for update`, [
    runId,
  ]);
  return rows;
};

/** What the driver needs of a graph or pipeline run, the row locked. */
export interface GraphRunRow {
  id: string;
  project_id: string;
  workflow: string;
  status: string;
  source: string;
  /** The document the engine runs (JSON text): a pipeline's compiled graph, a graph run's source (`coalesce(graph, source)`). */
  graph: string;
  /** A pipeline's job-level concurrency groups (migration 017), if any. */
  job_groups: JobGroup[] | null;
  filename: string;
  input: unknown;
  trusted: boolean;
  parent_run_id: string | null;
}

export const lockGraphRun = async (tx: PoolClient, runId: string): Promise<GraphRunRow | undefined> => {
  const { rows } = await tx.query<GraphRunRow>(
    `select id, project_id, workflow, status, source, coalesce(graph, source) as graph, job_groups, filename, input, trusted, parent_run_id
       from runs where id = $1 for update`,
    [runId],
  );
  return rows[0];
};

/** The columns a node update may set. */
export interface NodePatch {
  status?: GraphNodeStatus;
  attempt?: number;
  not_before?: Date | null;
  output?: unknown;
  output_sealed?: string | null;
  error?: string | null;
  mode?: GraphNodeRow["mode"];
  owner?: string | null;
  job_id?: string | null;
  job?: unknown;
  child_run_id?: string | null;
  wait_position?: number | null;
  substate?: GraphNodeView["substate"];
  started_at?: "now";
  finished_at?: "now" | null;
}

const JSON_COLUMNS = new Set(["output", "job", "substate"]);

/** Sets the given columns of one node (a fixed list of column names: nothing from outside becomes SQL). */
export const updateGraphNode = async (tx: PoolClient, runId: string, nodeId: string, patch: NodePatch): Promise<void> => {
  const sets: string[] = [];
  const values: unknown[] = [runId, nodeId];
  for (const [column, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    if (value === "now") {
      sets.push(`${column} = now()`);
      continue;
    }
    values.push(JSON_COLUMNS.has(column) && value !== null ? JSON.stringify(value) : value);
    sets.push(`${column} = $${values.length}`);
  }
  if (sets.length === 0) return;
  await tx.query(`update graph_nodes set ${sets.join(", ")} where run_id = $1 and node_id = $2`, values);
};

/** How an attempt ended; a failure that is `final` is not retried (nothing a retry could change: a refused destination). */
export type AttemptResult = { ok: true; output: unknown } | { ok: false; error: string; output?: unknown; final?: boolean };

/**
 * How a node's result is stored (SECURITY.md: what a run writes that the API shows is masked before
 * it is stored): its output and error masked with the run's project masker, so the API and the
 * console read a masked column; when masking changed the output, the exact output is sealed in
 * `output_sealed` (bound to the run and node) for the expressions of the nodes downstream
 * (openGraphNodeOutputs). An output with nothing to hide is stored once, and nothing is sealed.
 */
export interface NodeResultKeeper {
  masker: Pick<ValueMasker, "active" | "text" | "json">;
  keyring: Keyring;
  scope: JournalSealScope;
}

/**
 * A result's storage: a keeper, or `"as-written"` for a result no node computed from what it was
 * given: the server's own texts (a job given up, a timeout) and a code/shell node's finish, which
 * its writer masked already (finishNodeJob, with the job's masker).
 */
export type NodeResultStorage = NodeResultKeeper | "as-written";

/** The columns a result becomes (see NodeResultKeeper). */
export const storedNodeResult = async (
  storage: NodeResultStorage,
  place: { runId: string; nodeId: string },
  result: { output: unknown; error: string | null },
): Promise<{ output: unknown; output_sealed: string | null; error: string | null }> => {
  const clear = { output: result.output ?? null, output_sealed: null, error: result.error };
  if (storage === "as-written" || !storage.masker.active) return clear;
  const output = storage.masker.json(clear.output);
  const error = clear.error === null ? null : storage.masker.text(clear.error);
  const changed = JSON.stringify(output) !== JSON.stringify(clear.output);
  return {
    output,
    output_sealed: changed ? await sealNodeOutput(storage.keyring, storage.scope, place, clear.output) : null,
    error,
  };
};

/**
 * The rows' outputs as expressions see them: a sealed exact output opened (it fails closed when it
 * was sealed for another run or node), any other the stored one, as a row written before sealing.
 */
export const openGraphNodeOutputs = async <R extends Pick<GraphNodeRow, "node_id" | "output" | "output_sealed">>(
  keyring: Keyring,
  scope: JournalSealScope,
  runId: string,
  rows: readonly R[],
): Promise<R[]> =>
  Promise.all(
    rows.map(async (r) =>
      r.output_sealed === null ? r : { ...r, output: await openNodeOutput(keyring, scope, { runId, nodeId: r.node_id }, r.output_sealed) },
    ),
  );

/**
 * A node's running or parked attempt ended: success, or failure, which becomes a retry (the node
 * pending again, not before its backoff: the driver's durable poll starts it, so a restart loses
 * nothing) while the node's `retry.attempts` allow. Returns what the node became, or undefined
 * when the attempt was no longer current (a stale answer: nothing written).
 */
export const settleGraphNode = async (
  tx: PoolClient,
  s: {
    runId: string;
    nodeId: string;
    attempt: number;
    result: AttemptResult;
    /** How the result is stored: masked, its exact output sealed (NodeResultKeeper). */
    storage: NodeResultStorage;
    /** The graph driver, which advances the run itself. */ quiet?: boolean;
  },
): Promise<"success" | "retrying" | "failed" | undefined> => {
  assertStorableJson({ output: s.result.output ?? null, error: s.result.ok ? null : s.result.error }, "node output");
  const { rows } = await tx.query<{ status: string; attempt: number; retry: GraphNodeRow["retry"] }>(
    `select status, attempt, retry from graph_nodes where run_id = $1 and node_id = $2 for update`,
    [s.runId, s.nodeId],
  );
  const node = rows[0];
  if (!node || node.attempt !== s.attempt || !["running", "parked"].includes(node.status)) return undefined;
  const stored = await storedNodeResult(s.storage, s, { output: s.result.output, error: s.result.ok ? null : s.result.error });
  const done: NodePatch = { mode: null, owner: null, job_id: null, wait_position: null, substate: null, ...stored };
  let became: "success" | "retrying" | "failed";
  if (s.result.ok) {
    await updateGraphNode(tx, s.runId, s.nodeId, { ...done, status: "success", finished_at: "now" });
    became = "success";
  } else if (!s.result.final && node.retry && node.attempt < node.retry.attempts) {
    const notBefore = new Date(Date.now() + node.retry.backoff_ms);
    await updateGraphNode(tx, s.runId, s.nodeId, { ...done, status: "pending", not_before: notBefore });
    became = "retrying";
  } else {
    await updateGraphNode(tx, s.runId, s.nodeId, { ...done, status: "failed", finished_at: "now" });
    became = "failed";
  }
  if (!s.quiet) await notifyGraph(tx, s.runId);
  return became;
};

/** A code or shell node's attempt becomes a queued agent job of its run (kind 'node'). */
export const queueNodeJob = async (
  tx: PoolClient,
  j: { runId: string; nodeId: string; capabilities: readonly string[]; job: unknown },
): Promise<string> => {
  const id = mintId("job");
  await tx.query(`insert into jobs (id, run_id, status, kind, node_id, capabilities) values ($1, $2, 'queued', 'node', $3, $4)`, [
    id,
    j.runId,
    j.nodeId,
    j.capabilities,
  ]);
  await updateGraphNode(tx, j.runId, j.nodeId, { mode: "job", job_id: id, job: j.job });
  await tx.query(`select pg_notify('flowsvc_jobs', $1)`, [j.runId]);
  return id;
};

/** What a node job runs (the claim reads it): its script and the credentials map it declares. */
export interface NodeJobSpec {
  node_id: string;
  attempt: number;
  source: string;
  filename: string;
  interpreter: string[];
  env: Record<string, string>;
  credentials: Record<string, string>;
}

export const nodeJobSpec = async (db: Db, jobId: string): Promise<NodeJobSpec | undefined> => {
  const { rows } = await db.query<{ node_id: string; attempt: number; job: Omit<NodeJobSpec, "node_id" | "attempt"> | null }>(
    // The node by its primary key (a lateral subquery fenced by `offset 0`): as a join, the generic plan
    // made while graph_nodes is small scanned every node of every graph run for the job (generic-plans.test.ts).
    `select n.node_id, n.attempt, n.job from jobs j
       cross join lateral (select n.node_id, n.attempt, n.job, n.job_id from graph_nodes n where n.run_id = j.run_id and n.node_id = j.node_id offset 0) n
      where j.id = $1 and n.job_id = j.id`,
    [jobId],
  );
  const r = rows[0];
  return r?.job ? { node_id: r.node_id, attempt: r.attempt, ...r.job } : undefined;
};

/** The tail of a job's stdout, at most `limit` characters (a code node's `stdout` output). */
export const jobStdoutTail = async (db: Db, jobId: string, limit = NODE_STDOUT_LIMIT): Promise<string> => {
  const { rows } = await db.query<{ out: string | null }>(
    // The job's run narrows the read to its logs (run_logs_run); no index has job_id, so by job_id alone
    // every log line of every run was read.
    `select right(string_agg(data, '' order by id), $2) as out from run_logs
      where run_id = (select run_id from jobs where id = $1) and job_id = $1 and stream = 'stdout'`,
    [jobId, limit],
  );
  return rows[0]?.out ?? "";
};

/**
 * A node job ended (its finish, or the dispatcher giving up, or a claim whose credentials did not
 * resolve): the job's node settles by the retry rule. The caller ended the job and holds nothing:
 * the run row is locked here first.
 */
export const settleNodeJob = async (tx: PoolClient, jobId: string, result: AttemptResult): Promise<string | undefined> => {
  const { rows } = await tx.query<{ run_id: string; node_id: string }>(`select run_id, node_id from jobs where id = $1 and kind = 'node'`, [
    jobId,
  ]);
  const j = rows[0];
  if (!j) return undefined;
  await tx.query(`select 1 from runs where id = $1 for update`, [j.run_id]);
  const { rows: nodes } = await tx.query<{ attempt: number }>(
    `select attempt from graph_nodes where run_id = $1 and node_id = $2 and job_id = $3 for update`,
    [j.run_id, j.node_id, jobId],
  );
  if (!nodes[0]) return undefined;
  // The server's own texts, or a finish masked by finishNodeJob.
  return settleGraphNode(tx, { runId: j.run_id, nodeId: j.node_id, attempt: nodes[0].attempt, result, storage: "as-written" });
};

/**
 * The agent finished a code or shell node's job (POST /agent/v1/finish): output = the script's
 * `flow output set` values (masked), `exit_code`, and the tail of its stdout; exit 0 succeeds the
 * node, another exit fails the attempt (its retry policy applies) and keeps the output.
 */
export const finishNodeJob = async (
  tx: PoolClient,
  f: {
    jobId: string;
    exitCode: number;
    outputs: Record<string, string>;
    error?: string | undefined;
    masker: Pick<ValueMasker, "text" | "json">;
  },
): Promise<string | undefined> => {
  assertStorableJson({ outputs: f.outputs, error: f.error }, "finish");
  const { rowCount } = await tx.query(
    `update jobs set status = 'done', token_digest = null, lease_expires_at = null, updated_at = now()
      where id = $1 and status in ('dispatched', 'running')`,
    [f.jobId],
  );
  if ((rowCount ?? 0) === 0)
    throw new FlowError("job_lost", `job ${f.jobId} has already finished, or was dispatched again: its finish is not taken twice`);
  const stdout = f.masker.text(await jobStdoutTail(tx, f.jobId));
  const output = { ...(f.masker.json(f.outputs) as Record<string, string>), exit_code: f.exitCode, stdout };
  const result: AttemptResult =
    f.exitCode === 0
      ? { ok: true, output }
      : { ok: false, error: f.masker.text(f.error ?? `the script exited with code ${f.exitCode}`), output };
  return settleNodeJob(tx, f.jobId, result);
};

/**
 * Code and shell nodes whose job ran past its `timeout` (`job.timeout_ms`, counted from the
 * attempt's `started_at`): each job is ended as a cancel ends it (its agent loses the lease and
 * stops the script; a late finish is refused as job_lost), and the attempt fails with a timeout
 * error, so the node's retry policy applies. Answers the nodes that timed out.
 */
export const expireNodeJobs = async (tx: PoolClient, runId: string): Promise<string[]> => {
  const { rows } = await tx.query<{ node_id: string; attempt: number; job_id: string; timeout_ms: string }>(
    `select node_id, attempt, job_id, job->>'timeout_ms' as timeout_ms from graph_nodes
      where run_id = $1 and status = 'running' and mode = 'job' and job ? 'timeout_ms'
        and started_at + (job->>'timeout_ms')::bigint * interval '1 millisecond' <= now()
      for update`,
    [runId],
  );
  for (const r of rows) {
    await tx.query(
      `update jobs set status = 'done', token_digest = null, lease_expires_at = null, updated_at = now()
        where id = $1 and status in ('queued', 'dispatched', 'running')`,
      [r.job_id],
    );
    const error = `timed out after ${formatDuration(Number(r.timeout_ms))} (config.timeout): the job was ended`;
    await settleGraphNode(tx, {
      runId,
      nodeId: r.node_id,
      attempt: r.attempt,
      result: { ok: false, error },
      storage: "as-written",
      quiet: true,
    });
  }
  return rows.map((r) => r.node_id);
};

/**
 * Graph runs in flight (the driver's poll for due retries, orphaned attempts and runs nobody took
 * up). Each part is read from a small index of live rows (migration 029), never from the history:
 * pending nodes whose retry is due (graph_nodes_retry_due), running nodes whose inline owner is
 * another driver or whose job is past its timeout (graph_nodes_running), queued graph and pipeline
 * runs (runs_graph_live); each node's run is then looked up by primary key. Every predicate of a
 * partial index is written out literally, so that a generic plan can use it.
 */
export const graphRunsNeedingWork = async (db: Db, owner: string): Promise<string[]> => {
  const { rows } = await db.query<{ run_id: string }>(
    `select w.run_id from (
       select n.run_id from graph_nodes n
        where n.status = 'pending' and n.not_before is not null and n.not_before <= now()
       union
       select n.run_id from graph_nodes n
        where n.status = 'running'
          and ((n.mode = 'inline' and n.owner is distinct from $1)
            or (n.mode = 'job' and n.job ? 'timeout_ms' and n.started_at + (n.job->>'timeout_ms')::bigint * interval '1 millisecond' <= now()))
       union
       select r.id from runs r
        where r.workflow in (${GRAPH_ENGINE_WORKFLOWS_SQL}) and r.status in (${LIVE_STATUSES_SQL}) and r.status = 'queued'
     ) w
     where (select r.status from runs r where r.id = w.run_id) in (${LIVE_STATUSES_SQL})
     limit 500`,
    [owner],
  );
  return rows.map((r) => r.run_id);
};

/** The graph run and node a child run belongs to, if a workflow node started it. */
export const graphNodeOfChild = async (db: Db, childRunId: string): Promise<string | undefined> => {
  const { rows } = await db.query<{ run_id: string }>(`select run_id from graph_nodes where child_run_id = $1`, [childRunId]);
  return rows[0]?.run_id;
};

/** An emit node's event id for (run, node, attempt), if recorded. */
export const recordedNodeEmit = async (db: Db, k: { runId: string; nodeId: string; attempt: number }): Promise<string | undefined> => {
  const { rows } = await db.query<{ event_id: string }>(
    `select event_id from graph_node_emits where run_id = $1 and node_id = $2 and attempt = $3`,
    [k.runId, k.nodeId, k.attempt],
  );
  return rows[0]?.event_id;
};

export const recordNodeEmit = async (
  tx: PoolClient,
  k: { runId: string; nodeId: string; attempt: number; eventId: string },
): Promise<void> => {
  await tx.query(`insert into graph_node_emits (run_id, node_id, attempt, event_id) values ($1, $2, $3, $4)`, [
    k.runId,
    k.nodeId,
    k.attempt,
    k.eventId,
  ]);
};

/** A cancelled or failed graph: every node not yet terminal is cancelled, and its queued or live jobs end. */
export const cancelGraphNodes = async (tx: PoolClient, runId: string): Promise<void> => {
  await tx.query(
    `update graph_nodes set status = 'cancelled', mode = null, owner = null, finished_at = now()
      where run_id = $1 and status in ('pending', 'running', 'parked')`,
    [runId],
  );
  await tx.query(
    `update jobs set status = 'done', token_digest = null, lease_expires_at = null, updated_at = now()
      where run_id = $1 and kind = 'node' and status in ('queued', 'dispatched', 'running')`,
    [runId],
  );
  await notifyGraph(tx, runId);
};

/**
 * A graph run's `input`, and each node's status and output as stored: masked where a node's output
 * held a project secret or credential (the exact one is sealed; the graph driver's scope opens it).
 * An event node's `when`, evaluated as the bus delivers an event (emit.ts), reads this one.
 */
export const graphScope = async (db: Db, runId: string): Promise<GraphScope> => {
  const [{ rows: run }, { rows: nodes }] = await Promise.all([
    db.query<{ input: unknown }>(`select input from runs where id = $1`, [runId]),
    db.query<{ node_id: string; status: GraphNodeStatus; output: unknown }>(
      `select node_id, status, output from graph_nodes where run_id = $1`,
      [runId],
    ),
  ]);
  return {
    input: run[0]?.input ?? {},
    nodes: Object.fromEntries(nodes.map((n) => [n.node_id, { status: n.status, output: n.output ?? null }])),
  };
};

/**
 * Every graph or pipeline run not yet ended (the driver's sweep at start and after a lost LISTEN
 * connection: a nudge sent meanwhile is gone), from runs_graph_live (migration 029): the live graph
 * runs alone, not every run ever made.
 */
export const liveGraphRuns = async (db: Db): Promise<string[]> => {
  const { rows } = await db.query<{ id: string }>(
    `select id from runs where workflow in (${GRAPH_ENGINE_WORKFLOWS_SQL}) and status in (${LIVE_STATUSES_SQL}) order by created_at limit 10000`,
  );
  return rows.map((r) => r.id);
};
