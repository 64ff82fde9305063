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
  GRAPH_NAME,
  GRAPH_NAME_MAX,
  CONNECTOR_CHECKS,
  assertGraphName,
  connectorManifest,
  graphError,
  parseGraph,
  type GraphEndpointWrite,
  type ManifestInfo,
  type ParseGraphOptions,
} from "@flowsvc/core";
import { getStoredGraph, graphSaveProblems, listGraphEndpoints, listStoredGraphs, graphRequirements } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";
import { graphEndpointUrl } from "./graph-endpoints.js";

/** A connector type's manifest (D's connectorManifest), or undefined. */
export type ManifestLookup = (type: string) => ManifestInfo | undefined;

/** The graph name rule is core's (resources/graph.ts); re-exported for this module's importers. */
export { GRAPH_NAME, GRAPH_NAME_MAX };

const NameParams = z.object({ org: z.string(), project: z.string(), name: z.string() });
const PutBody = z.object({ document: z.unknown() }).strict();

const BASE = "/api/v1/orgs/:org/projects/:project/graphs";

const nameOf = (req: FastifyRequest): string => {
  const { name } = NameParams.parse(req.params);
  assertGraphName(name);
  return name;
};

const notFound = (where: { org: string; project: string }, name: string): FlowError =>
  new FlowError("not_found", `graph ${name} is not stored in ${where.org}/${where.project}`, { hint: "list them with `flow graph ls`" });

/** What a save refuses beyond parseGraph: store's graphSaveProblems (the FlowGraph reconciler checks it too). */
export const saveProblems = graphSaveProblems;

type Where = { org: string; project: string };

const describeEndpoint = (deps: IngestDeps, req: FastifyRequest, where: Where & { graph: string }, e: GraphEndpointWrite) => ({
  ...e,
  emits: e.event_type,
  ingest_url: graphEndpointUrl(deps.publicUrl ?? `${req.protocol}://${req.host}`, { ...where, node: e.node_id }),
});

const putRoute = (app: FastifyInstance, deps: IngestDeps, checks: ParseGraphOptions): void => {
  app.put(
    `${BASE}/:name`,
    api({
      summary: "Store (201) or replace (200) a graph; a draft may name credentials that do not exist yet",
      tag: "graphs",
      auth: "admin",
      params: NameParams,
      body: PutBody,
      response: {
        status: 201,
        description: "the graph's name, node count and endpoints (a trigger/webhook endpoint's secret only when minted)",
      },
    }),
    async (req, reply) => {
      const scope = await authorize(deps.pool, req, "admin");
      const name = nameOf(req);
      const body = PutBody.safeParse(req.body);
      if (!body.success || body.data.document === undefined)
        throw new FlowError("invalid_argument", "document: required: the body is {document: <a flowsvc-graph/v1 graph>}", {
          details: { field: "document" },
        });
      const parsed = parseGraph(body.data.document, checks);
      if (!parsed.ok) throw graphError(parsed.problems);
      const extra = saveProblems(parsed.graph, name);
      if (extra.length > 0) throw graphError(extra);
      // Through the ResourceStore: in kubernetes mode the FlowGraph is written too (issue 16).
      const saved = await deps.resources.putGraph(scope, {
        name,
        document: parsed.graph,
        sent: body.data.document,
        userId: scope.caller.userId,
      });
      req.log.info(
        { graph: name, created: saved.created, caller: scope.caller.userName },
        saved.created ? "graph stored" : "graph replaced",
      );
      return reply.status(saved.created ? 201 : 200).send({
        name,
        nodes: parsed.graph.nodes.length,
        created_by: saved.createdBy,
        updated_at: saved.updatedAt,
        endpoints: saved.endpoints.map((e) => describeEndpoint(deps, req, { ...scope, graph: name }, e)),
      });
    },
  );
};

const readRoutes = (app: FastifyInstance, deps: IngestDeps): void => {
  app.get(BASE, api({ summary: "List stored graphs", tag: "graphs", auth: "viewer" }), async (req) => {
    const scope = await authorize(deps.pool, req, "viewer");
    return listStoredGraphs(deps.pool, scope.projectId);
  });
  app.get(`${BASE}/:name`, api({ summary: "Show a stored graph", tag: "graphs", auth: "viewer", params: NameParams }), async (req) => {
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
  app.get(
    `${BASE}/:name/requirements`,
    api({
      summary: "The graph requirements report (credentials: ok, missing, wrong_kind, conflict, needs_reconnect)",
      tag: "graphs",
      auth: "viewer",
      params: NameParams,
    }),
    async (req) => {
      const scope = await authorize(deps.pool, req, "viewer");
      const name = nameOf(req);
      const g = await getStoredGraph(deps.pool, scope.projectId, name);
      if (!g) throw notFound(scope, name);
      return graphRequirements(deps.pool, scope.projectId, g.document, manifestOf);
    },
  );
};

const removeRoute = (app: FastifyInstance, deps: IngestDeps): void => {
  app.delete(
    `${BASE}/:name`,
    api({
      summary: "Delete a stored graph and its endpoints",
      tag: "graphs",
      auth: "admin",
      params: NameParams,
      response: { status: 204 },
    }),
    async (req, reply) => {
      const scope = await authorize(deps.pool, req, "admin");
      const name = nameOf(req);
      if (!(await deps.resources.deleteGraph(scope, name))) throw notFound(scope, name);
      req.log.info({ graph: name, caller: scope.caller.userName }, "graph removed");
      return reply.status(204).send();
    },
  );
};

/**
 * The stored graph routes, with the connector checks a save takes (core's CONNECTOR_CHECKS in the
 * app, as every other check of a document; a test may pass its own).
 */
export const graphRoutesWith =
  (checks: ParseGraphOptions & { manifestOf: ManifestLookup }): FastifyPluginCallback<IngestDeps> =>
  (app, deps, done) => {
    putRoute(app, deps, checks);
    readRoutes(app, deps);
    requirementsRoute(app, deps, checks.manifestOf);
    removeRoute(app, deps);
    done();
  };

/** The app's stored graph routes, checking connector nodes against core's manifests (core/src/graph/connectors.ts). */
export const graphRoutes: FastifyPluginCallback<IngestDeps> = graphRoutesWith({ ...CONNECTOR_CHECKS, manifestOf: connectorManifest });
