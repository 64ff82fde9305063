/**
 * Stored graphs (spec, "Graph document shape", "Graph requirements report", Errors: "A draft graph
 * may be saved before its credentials exist", "Connector node saved without a credential that its
 * connector requires: refused at save").
 *
 * Under `{scoped}/graphs[/{name}[/requirements]]`; roles as for credentials: viewers list, show and
 * read the requirements report, admins set and remove. Choices where the spec is silent:
 * - A graph name is 1-40 of ASCII letters, digits, `_` and `-`, starting with a letter or digit:
 *   it is part of the event types its endpoints emit (`graph.<graph>.<node>.delivery`), so no `.`.
 * - `set` of an existing graph replaces its document and keeps its creator; endpoints of nodes that
 *   stay keep their secrets; only an endpoint created by this save answers with its secret, once.
 * - GET of one graph answers the document as it was sent (its `source`), not a normalised copy.
 */
import { z } from "zod";

import type { FastifyInstance, FastifyPluginCallback, FastifyRequest } from "fastify";
import {
  FlowError,
  connectorManifest,
  graphCredentialRequirements,
  graphError,
  parseGraph,
  requirementsReport,
  type GraphDocument,
  type GraphProblem,
  type ManifestInfo,
} from "@flowsvc/core";
import {
  deleteStoredGraph,
  getStoredGraph,
  graphEndpointType,
  listGraphEndpoints,
  listStoredGraphs,
  putStoredGraph,
  readNameHoldings,
  type GraphEndpointKind,
  type GraphEndpointRecord,
} from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { graphEndpointUrl } from "./graph-endpoints.js";

/** A connector type's manifest (D's connectorManifest), or undefined. */
export type ManifestLookup = (type: string) => ManifestInfo | undefined;

/** Longest graph name, and its characters (no `.`: the name is a segment of the endpoints' event types). */
export const GRAPH_NAME_MAX = 40;
export const GRAPH_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$/;

const NameParams = z.object({ org: z.string(), project: z.string(), name: z.string() });
const PutBody = z.object({ document: z.unknown() }).strict();

const BASE = "/api/v1/orgs/:org/projects/:project/graphs";

const nameOf = (req: FastifyRequest): string => {
  const { name } = NameParams.parse(req.params);
  if (!GRAPH_NAME.test(name)) {
    const shown = JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}...` : name);
    throw new FlowError(
      "invalid_argument",
      `graph name ${shown} is not allowed: use 1-${GRAPH_NAME_MAX} ASCII letters, digits, "_" and "-", starting with a letter or digit`,
      { details: { field: "name" } },
    );
  }
  return name;
};

const notFound = (where: { org: string; project: string }, name: string): FlowError =>
  new FlowError("not_found", `graph ${name} is not stored in ${where.org}/${where.project}`, { hint: "list them with `flow graph ls`" });

const ENDPOINT_KINDS: readonly string[] = ["trigger", "webhook"] satisfies GraphEndpointKind[];

/**
 * What a save refuses beyond parseGraph (which, given the manifests, refuses a connector node
 * without the credential its manifest requires): an endpoint node whose event type would be longer
 * than an event type may be. Each problem names its path.
 */
export const saveProblems = (graph: GraphDocument, name: string): GraphProblem[] => {
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

type Where = { org: string; project: string };

const describeEndpoint = (deps: IngestDeps, req: FastifyRequest, where: Where & { graph: string }, e: GraphEndpointRecord) => ({
  ...e,
  emits: e.event_type,
  ingest_url: graphEndpointUrl(deps.publicUrl ?? `${req.protocol}://${req.host}`, { ...where, node: e.node_id }),
});

const putRoute = (app: FastifyInstance, deps: IngestDeps, manifestOf: ManifestLookup): void => {
  app.put(`${BASE}/:name`, async (req, reply) => {
    const scope = await authorize(deps.pool, req, "admin");
    const name = nameOf(req);
    const body = PutBody.safeParse(req.body);
    if (!body.success || body.data.document === undefined)
      throw new FlowError("invalid_argument", "document: required: the body is {document: <a flowsvc-graph/v1 graph>}", {
        details: { field: "document" },
      });
    const parsed = parseGraph(body.data.document, { manifestOf });
    if (!parsed.ok) throw graphError(parsed.problems);
    const extra = saveProblems(parsed.graph, name);
    if (extra.length > 0) throw graphError(extra);
    const endpoints = parsed.graph.nodes
      .filter((n) => ENDPOINT_KINDS.includes(n.type))
      .map((n) => ({ nodeId: n.id, kind: n.type as GraphEndpointKind, eventType: graphEndpointType(name, n.id, n.config["event_type"]) }));
    const saved = await putStoredGraph(deps.pool, {
      projectId: scope.projectId,
      name,
      document: parsed.graph,
      source: `${JSON.stringify(body.data.document, null, 2)}\n`,
      userId: scope.caller.userId,
      endpoints,
    });
    req.log.info({ graph: name, created: saved.created, caller: scope.caller.userName }, saved.created ? "graph stored" : "graph replaced");
    return reply.status(saved.created ? 201 : 200).send({
      name,
      nodes: parsed.graph.nodes.length,
      created_by: saved.graph.createdBy,
      updated_at: saved.graph.updatedAt,
      endpoints: saved.endpoints.map((e) => describeEndpoint(deps, req, { ...scope, graph: name }, e)),
    });
  });
};

const readRoutes = (app: FastifyInstance, deps: IngestDeps): void => {
  app.get(BASE, async (req) => {
    const scope = await authorize(deps.pool, req, "viewer");
    return listStoredGraphs(deps.pool, scope.projectId);
  });
  app.get(`${BASE}/:name`, async (req) => {
    const scope = await authorize(deps.pool, req, "viewer");
    const name = nameOf(req);
    const g = await getStoredGraph(deps.pool, scope.projectId, name);
    if (!g) throw notFound(scope, name);
    const endpoints = await listGraphEndpoints(deps.pool, scope.projectId, name);
    return {
      name,
      document: JSON.parse(g.source) as unknown,
      created_by: g.createdBy,
      updated_at: g.updatedAt,
      endpoints: endpoints.map((e) => describeEndpoint(deps, req, { ...scope, graph: name }, e)),
    };
  });
};

const requirementsRoute = (app: FastifyInstance, deps: IngestDeps, manifestOf: ManifestLookup): void => {
  app.get(`${BASE}/:name/requirements`, async (req) => {
    const scope = await authorize(deps.pool, req, "viewer");
    const name = nameOf(req);
    const g = await getStoredGraph(deps.pool, scope.projectId, name);
    if (!g) throw notFound(scope, name);
    const reqs = graphCredentialRequirements(g.document, manifestOf);
    const holdings = await readNameHoldings(
      deps.pool,
      scope.projectId,
      reqs.flatMap((r) => (r.name === null ? [] : [r.name])),
    );
    return requirementsReport(reqs, (n) => holdings.get(n));
  });
};

const removeRoute = (app: FastifyInstance, deps: IngestDeps): void => {
  app.delete(`${BASE}/:name`, async (req, reply) => {
    const scope = await authorize(deps.pool, req, "admin");
    const name = nameOf(req);
    if (!(await deleteStoredGraph(deps.pool, scope.projectId, name))) throw notFound(scope, name);
    req.log.info({ graph: name, caller: scope.caller.userName }, "graph removed");
    return reply.status(204).send();
  });
};

/**
 * The stored graph routes, with the connector manifests they check a save against (core's
 * connectorManifest in the app; a test may pass its own).
 */
export const graphRoutesWith =
  (manifestOf: ManifestLookup): FastifyPluginCallback<IngestDeps> =>
  (app, deps, done) => {
    putRoute(app, deps, manifestOf);
    readRoutes(app, deps);
    requirementsRoute(app, deps, manifestOf);
    removeRoute(app, deps);
    done();
  };

/** The app's stored graph routes, checking connector nodes against core's manifests (core/src/graph/connectors.ts). */
export const graphRoutes: FastifyPluginCallback<IngestDeps> = graphRoutesWith(connectorManifest);
