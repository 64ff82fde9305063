/**
 * A stored graph's own ingest endpoints (spec, "Inbound hook and trigger-node choice": a graph
 * trigger node's endpoint lives and dies with its graph and emits `graph.<graph>.<node>.*`).
 *
 * `POST /api/v1/graph-hooks/{org}/{project}/{graph}/{node}`: one per `trigger` or `webhook` node of
 * a stored graph, created when the graph is saved with the node and removed with the node or the
 * graph (store/src/graphs.ts). It takes deliveries exactly as a shared-token event hook does: the
 * secret in `X-Flow-Hook-Secret` or the `secret` query parameter (401 without it or with a wrong
 * one), any body up to 2 MiB, payload `{body, query}`, 202 `{event_id, event_type}` once the event
 * is committed (a trigger endpoint's answer adds the `run_id` it started). The event's type is `graph.<graph>.<node>.delivery` (or `.<config.event_type>`); an unknown
 * endpoint is a 404.
 */
import type { FastifyPluginCallback } from "fastify";
import { EMIT_BODY_LIMIT, FlowError, assertStorableJson, redactSecretQuery, trustOf } from "@flowsvc/core";
import type { PoolClient } from "pg";
import {
  emitEvent,
  findGraphEndpoint,
  getStoredGraph,
  hookSecretMatches,
  startGraphRun,
  withTransaction,
  type IngestGraphEndpoint,
} from "@flowsvc/store";
import type { IngestDeps } from "../deps.js";
import { bodyValue, presentedSecret, queryObject } from "./hook-ingest.js";
import { api } from "../openapi/route-doc.js";

/** Where a graph endpoint takes deliveries. */
export const graphEndpointUrl = (baseUrl: string, where: { org: string; project: string; graph: string; node: string }): string =>
  `${baseUrl.replace(/\/+$/, "")}/api/v1/graph-hooks/${[where.org, where.project, where.graph, where.node].map(encodeURIComponent).join("/")}`;

const SECRET_HELP =
  "send the endpoint's secret (printed once by `flow graph set`) in the X-Flow-Hook-Secret header, or in the secret query parameter";

type Target = { org: string; project: string; graph: string; node: string };

/**
 * A trigger endpoint's delivery starts a run of the graph as it is stored now, its input the event
 * envelope (`{type, event, payload}`), in the transaction that records the event; a graph removed
 * meanwhile starts none. The delivery id keys the run, so one event starts one run.
 */
const startTriggeredRun = async (
  tx: PoolClient,
  d: { endpoint: IngestGraphEndpoint; eventId: string; type: string; payload: unknown; trusted: boolean },
): Promise<string | undefined> => {
  const graph = await getStoredGraph(tx, d.endpoint.projectId, d.endpoint.graphName);
  if (!graph) return undefined;
  const run = await startGraphRun(tx, {
    projectId: d.endpoint.projectId,
    name: graph.name,
    source: graph.source,
    document: graph.document,
    input: { type: d.type, event: d.eventId, payload: d.payload },
    trigger: { type: d.type, event: d.eventId },
    trusted: d.trusted,
    parentRunId: null,
    idempotencyKey: `graph-trigger:${d.eventId}`,
  });
  return run.id;
};

export const graphEndpointRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: EMIT_BODY_LIMIT }, (_req, body, parsed) => parsed(null, body));
  const doc = api({
    summary: "Deliver to a stored graph's trigger or webhook node; 202 once its graph.<graph>.<node>.* event is committed",
    tag: "graphs",
    auth: "hook",
    body: {},
    bodyType: "*/*",
    response: { status: 202, description: "`{event_id, event_type}`" },
  });
  app.post("/api/v1/graph-hooks/:org/:project/:graph/:node", { bodyLimit: EMIT_BODY_LIMIT, ...doc }, async (req, reply) => {
    const target = req.params as Target;
    const qs = req.url.indexOf("?");
    const query = new URLSearchParams(qs < 0 ? "" : req.url.slice(qs + 1));
    const endpoint = await findGraphEndpoint(deps.pool, target);
    if (!endpoint)
      throw new FlowError("not_found", `no endpoint for node ${target.node} of graph ${target.graph} in ${target.org}/${target.project}`, {
        hint: "a graph's endpoints are printed by `flow graph set` and `flow graph show`",
      });
    const secret = presentedSecret(req, query);
    if (secret === undefined || !hookSecretMatches(secret, endpoint.secretDigest)) {
      req.log.info({ graph: target.graph, node: target.node, url: redactSecretQuery(req.url) }, "graph endpoint delivery refused");
      throw new FlowError(
        "unauthenticated",
        secret === undefined ? `no secret was sent; ${SECRET_HELP}` : `the secret sent is not this endpoint's; ${SECRET_HELP}`,
      );
    }
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const type = endpoint.eventType;
    const payload = { body: assertStorableJson(bodyValue(raw)), query: queryObject(query) };
    const trusted = trustOf({ by: "delivery", trusted: true });
    const answer = await withTransaction(deps.pool, async (tx) => {
      const { eventId } = await emitEvent(tx, { projectId: endpoint.projectId, type, key: null, payload, sourceRunId: null, trusted });
      if (endpoint.kind !== "trigger") return { event_id: eventId, event_type: type };
      const run = await startTriggeredRun(tx, { endpoint, eventId, type, payload, trusted });
      return { event_id: eventId, event_type: type, ...(run ? { run_id: run } : {}) };
    });
    return reply.status(202).send(answer);
  });
  done();
};
