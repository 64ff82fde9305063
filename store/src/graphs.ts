/**
 * Stored graphs in Postgres (migration 011): a project's named flowsvc-graph/v1 documents, and the
 * ingest endpoints their `trigger` and `webhook` nodes own. The route checks a document with core's
 * parseGraph before it gets here; this module stores what it is given and keeps each graph's
 * endpoints in step with its nodes, in the transaction that writes the graph.
 */
import type { Pool, PoolClient } from "pg";
import type { GraphDocument, GraphProblem } from "@flowsvc/core";
import { GRAPH_WORKFLOW, insertGraphNodes } from "./graph-runs.js";
import { mintHookSecret } from "./hooks.js";
import { createRun } from "./run-lifecycle.js";
import { withTransaction } from "./pool.js";

type Db = Pool | PoolClient;

export interface StoredGraph {
  name: string;
  document: GraphDocument;
  /** The JSON text a run of this graph carries (runs.source). */
  source: string;
  updatedAt: string;
  /** The user name of whoever saved it first; null when that user is gone. */
  createdBy: string | null;
}

/** What `flow graph ls` shows of a graph: never the document. */
export interface StoredGraphMeta {
  name: string;
  nodes: number;
  endpoints: number;
  created_by: string | null;
  created_at: string;
  updated_at: string;
}

export type GraphEndpointKind = "trigger" | "webhook";

/** One endpoint of a graph as stored; `secret` only on the save that created it (shown once). */
export interface GraphEndpointRecord {
  node_id: string;
  kind: GraphEndpointKind;
  /** What a delivery emits: `graph.<graph>.<node>.<suffix>`. */
  event_type: string;
  created_at: string;
  secret?: string;
}

type GraphRow = { name: string; document: GraphDocument; source: string; updated_at: Date; created_by: string | null };

export const getStoredGraph = async (db: Db, projectId: string, name: string): Promise<StoredGraph | undefined> => {
  const { rows } = await db.query<GraphRow>(
    `select g.name, g.document, g.source, g.updated_at, u.name as created_by
       from graphs g left join users u on u.id = g.created_by
      where g.project_id = $1 and g.name = $2`,
    [projectId, name],
  );
  const r = rows[0];
  return r
    ? { name: r.name, document: r.document, source: r.source, updatedAt: r.updated_at.toISOString(), createdBy: r.created_by }
    : undefined;
};

export const listStoredGraphs = async (db: Db, projectId: string): Promise<StoredGraphMeta[]> => {
  const { rows } = await db.query<{
    name: string;
    nodes: number;
    endpoints: number;
    created_by: string | null;
    created_at: Date;
    updated_at: Date;
  }>(
    `select g.name, jsonb_array_length(g.document -> 'nodes') as nodes,
            (select count(*)::int from graph_endpoints e where e.project_id = g.project_id and e.graph_name = g.name) as endpoints,
            u.name as created_by, g.created_at, g.updated_at
       from graphs g left join users u on u.id = g.created_by
      where g.project_id = $1 order by g.name`,
    [projectId],
  );
  return rows.map((r) => ({ ...r, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString() }));
};

type EndpointRow = { node_id: string; kind: GraphEndpointKind; event_type: string; created_at: Date };
const endpointOf = (r: EndpointRow): GraphEndpointRecord => ({
  node_id: r.node_id,
  kind: r.kind,
  event_type: r.event_type,
  created_at: r.created_at.toISOString(),
});

export const listGraphEndpoints = async (db: Db, projectId: string, graphName: string): Promise<GraphEndpointRecord[]> => {
  const { rows } = await db.query<EndpointRow>(
    `select node_id, kind, event_type, created_at from graph_endpoints where project_id = $1 and graph_name = $2 order by node_id`,
    [projectId, graphName],
  );
  return rows.map(endpointOf);
};

export interface PutStoredGraph {
  projectId: string;
  name: string;
  document: GraphDocument;
  source: string;
  /** The saving user's id: recorded when the graph is created, kept when it is replaced (null: a FlowGraph's reconciler). */
  userId: string | null;
  /** The graph's trigger and webhook nodes: each gets an endpoint; an endpoint whose node is gone is removed. */
  endpoints: ReadonlyArray<{ nodeId: string; kind: GraphEndpointKind; eventType: string }>;
}

/**
 * Keeps a graph's endpoints in step with its nodes: a new endpoint node gets an endpoint and a new
 * secret (answered once), a node that stays keeps its secret (senders keep working; a change of
 * kind keeps it too), a node that is gone loses its endpoint.
 */
const syncEndpoints = async (tx: PoolClient, put: PutStoredGraph): Promise<GraphEndpointRecord[]> => {
  const ids = put.endpoints.map((e) => e.nodeId);
  await tx.query(`delete from graph_endpoints where project_id = $1 and graph_name = $2 and not (node_id = any($3::text[]))`, [
    put.projectId,
    put.name,
    ids,
  ]);
  const out: GraphEndpointRecord[] = [];
  for (const e of put.endpoints) {
    const { secret, digest } = mintHookSecret();
    const { rows } = await tx.query<EndpointRow & { created: boolean }>(
      `insert into graph_endpoints (project_id, graph_name, node_id, kind, event_type, secret_digest) values ($1, $2, $3, $4, $5, $6)
       on conflict (project_id, graph_name, node_id) do update set kind = excluded.kind, event_type = excluded.event_type
       returning node_id, kind, event_type, created_at, (xmax = 0) as created`,
      [put.projectId, put.name, e.nodeId, e.kind, e.eventType, digest],
    );
    const row = rows[0]!;
    out.push({ ...endpointOf(row), ...(row.created ? { secret } : {}) });
  }
  return out;
};

/**
 * Creates or replaces a stored graph and its endpoints, in one transaction. `created` tells which
 * happened; the endpoints created by this save carry their secret, once.
 */
export const putStoredGraph = async (
  pool: Pool,
  put: PutStoredGraph,
): Promise<{ graph: StoredGraph; created: boolean; endpoints: GraphEndpointRecord[] }> =>
  withTransaction(pool, async (tx) => {
    const { rows } = await tx.query<{ created: boolean }>(
      `insert into graphs (project_id, name, document, source, created_by) values ($1, $2, $3, $4, $5)
       on conflict (project_id, name) do update set document = excluded.document, source = excluded.source, updated_at = now()
       returning (xmax = 0) as created`,
      [put.projectId, put.name, JSON.stringify(put.document), put.source, put.userId],
    );
    const endpoints = await syncEndpoints(tx, put);
    const graph = (await getStoredGraph(tx, put.projectId, put.name))!;
    return { graph, created: rows[0]!.created, endpoints };
  });

/** Removes a stored graph and its endpoints; false when there was none. Runs of it keep their source. */
export const deleteStoredGraph = async (db: Db, projectId: string, name: string): Promise<boolean> => {
  const { rowCount } = await db.query(`delete from graphs where project_id = $1 and name = $2`, [projectId, name]);
  return (rowCount ?? 0) > 0;
};

/** What ingest needs to verify one delivery to a graph endpoint. */
export interface IngestGraphEndpoint {
  orgId: string;
  projectId: string;
  graphName: string;
  nodeId: string;
  kind: GraphEndpointKind;
  eventType: string;
  secretDigest: Buffer;
}

/** The endpoint behind `/api/v1/graph-hooks/{org}/{project}/{graph}/{node}`, in one query. */
export const findGraphEndpoint = async (
  db: Db,
  where: { org: string; project: string; graph: string; node: string },
): Promise<IngestGraphEndpoint | undefined> => {
  const { rows } = await db.query<{
    org_id: string;
    project_id: string;
    kind: GraphEndpointKind;
    event_type: string;
    secret_digest: Buffer;
  }>(
    `select o.id as org_id, p.id as project_id, e.kind, e.event_type, e.secret_digest
       from graph_endpoints e join projects p on p.id = e.project_id join orgs o on o.id = p.org_id
      where o.name = $1 and p.name = $2 and e.graph_name = $3 and e.node_id = $4`,
    [where.org, where.project, where.graph, where.node],
  );
  const r = rows[0];
  return r
    ? {
        orgId: r.org_id,
        projectId: r.project_id,
        graphName: where.graph,
        nodeId: where.node,
        kind: r.kind,
        eventType: r.event_type,
        secretDigest: r.secret_digest,
      }
    : undefined;
};

/**
 * The event type a graph endpoint emits: `graph.<graph>.<node>.<suffix>`, the suffix being the
 * node's `config.event_type` when it names one, else `delivery`.
 */
export const graphEndpointType = (graph: string, node: string, suffix: unknown = undefined): string =>
  `graph.${graph}.${node}.${typeof suffix === "string" && suffix !== "" ? suffix : "delivery"}`;

const ENDPOINT_KINDS: readonly string[] = ["trigger", "webhook"] satisfies GraphEndpointKind[];

/**
 * What a save refuses beyond parseGraph (which, given the manifests, refuses a connector node
 * without the credential its manifest requires): an endpoint node whose event type would be longer
 * than an event type may be. Each problem names its path. The API's PUT and the FlowGraph
 * reconciler both check it.
 */
export const graphSaveProblems = (graph: GraphDocument, name: string): GraphProblem[] => {
  const problems: GraphProblem[] = [];
  graph.nodes.forEach((node, i) => {
    const type = graphEndpointType(name, node.id, node.config["event_type"]);
    if (ENDPOINT_KINDS.includes(node.type) && type.length > 64)
      problems.push({
        path: `nodes[${i}].id`,
        message: `the endpoint's event type ${type} is longer than 64 characters: shorten the graph name, the node id or its event_type`,
      });
  });
  return problems;
};

/** The endpoints a graph's trigger and webhook nodes own (PutStoredGraph.endpoints). */
export const graphEndpointsOf = (graph: GraphDocument, name: string): PutStoredGraph["endpoints"] =>
  graph.nodes
    .filter((n) => ENDPOINT_KINDS.includes(n.type))
    .map((n) => ({ nodeId: n.id, kind: n.type as GraphEndpointKind, eventType: graphEndpointType(name, n.id, n.config["event_type"]) }));

/** What starting a run of a graph needs, beside the transaction: the graph, its input, and what started it. */
export interface GraphRunStart {
  projectId: string;
  /** The stored graph's name (the run's filename is `graph:<name>`). */
  name: string;
  source: string;
  document: GraphDocument;
  input: unknown;
  trigger: Record<string, unknown>;
  trusted: boolean;
  parentRunId: string | null;
  /** A repeat under the same key answers the first run and writes nothing. */
  idempotencyKey: string | null;
}

/**
 * A run of a graph that no person submitted: a workflow node's child, or a trigger endpoint's
 * delivery. The run and its pending nodes, in the caller's transaction; the graph driver picks it up.
 */
export const startGraphRun = async (tx: PoolClient, s: GraphRunStart): Promise<{ id: string; duplicate: boolean }> => {
  const r = await createRun(tx, {
    projectId: s.projectId,
    workflow: GRAPH_WORKFLOW,
    source: s.source,
    filename: `graph:${s.name}`,
    interpreter: [],
    trigger: s.trigger,
    trusted: s.trusted,
    parentRunId: s.parentRunId,
    idempotencyKey: s.idempotencyKey,
  });
  if (!r.duplicate) {
    const nodes = s.document.nodes.map((n) => ({ id: n.id, type: n.type, ...(n.retry ? { retry: n.retry } : {}) }));
    await insertGraphNodes(tx, r.id, { nodes, input: s.input });
  }
  return r;
};

/**
 * The event types the project's stored graphs declare, for the event catalog: what their endpoints
 * emit (`graph.<graph>.<node>.delivery`) and the literal `type` of their `emit` nodes (a type given
 * as an expression is known only when the node runs). One row per (type, graph), by type.
 */
export const listDeclaredEventTypes = async (db: Db, projectId: string): Promise<Array<{ type: string; graph: string }>> => {
  const { rows } = await db.query<{ type: string; graph: string }>(
    `select distinct type, graph from (
       select e.event_type as type, e.graph_name as graph from graph_endpoints e where e.project_id = $1
       union all
       select n -> 'config' ->> 'type', g.name from graphs g cross join lateral jsonb_array_elements(g.document -> 'nodes') n
        where g.project_id = $1 and n ->> 'type' = 'emit' and jsonb_typeof(n -> 'config' -> 'type') = 'string'
     ) d order by type, graph`,
    [projectId],
  );
  return rows;
};
