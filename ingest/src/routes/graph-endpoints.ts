/**
 * A stored graph's own ingest endpoints (spec, "Inbound hook and trigger-node choice": a graph
 * trigger node's endpoint lives and dies with its graph and emits `graph.<graph>.<node>.*`).
 *
 * `POST /api/v1/graph-hooks/{org}/{project}/{graph}/{node}`: one per `trigger` or `webhook` node of
 * a stored graph, created when the graph is saved with the node and removed with the node or the
 * graph (store/src/graphs.ts). It takes deliveries exactly as a shared-token event hook does: the
 * secret in `X-Flow-Hook-Secret` or the `secret` query parameter (401 without it or with a wrong
 * one), any body up to 2 MiB, payload `{body, query}`, 202 `{event_id, event_type}` once the event
 * is committed. The event's type is `graph.<graph>.<node>.delivery` (or `.<config.event_type>`); an unknown
 * endpoint is a 404.
 */
import type { FastifyPluginCallback, FastifyRequest } from "fastify";
import { EMIT_BODY_LIMIT, FlowError, assertStorableJson, redactSecretQuery, trustOf } from "@flowsvc/core";
import { emitEvent, findGraphEndpoint, hookSecretMatches, withTransaction } from "@flowsvc/store";
import type { IngestDeps } from "../deps.js";
import { HOOK_SECRET_HEADER } from "./hook-ingest.js";

/**
 * The event type a graph endpoint emits: `graph.<graph>.<node>.<suffix>`, the suffix being the
 * node's `config.event_type` when it names one, else `delivery`.
 */
export const graphEndpointType = (graph: string, node: string, suffix: unknown = undefined): string =>
  `graph.${graph}.${node}.${typeof suffix === "string" && suffix !== "" ? suffix : "delivery"}`;

/** Where a graph endpoint takes deliveries. */
export const graphEndpointUrl = (baseUrl: string, where: { org: string; project: string; graph: string; node: string }): string =>
  `${baseUrl.replace(/\/+$/, "")}/api/v1/graph-hooks/${[where.org, where.project, where.graph, where.node].map(encodeURIComponent).join("/")}`;

const SECRET_HELP =
  "send the endpoint's secret (printed once by `flow graph set`) in the X-Flow-Hook-Secret header, or in the secret query parameter";

type Target = { org: string; project: string; graph: string; node: string };

const presentedSecret = (req: FastifyRequest, query: URLSearchParams): string | undefined => {
  const h = req.headers[HOOK_SECRET_HEADER];
  return (typeof h === "string" ? h : undefined) ?? query.get("secret") ?? undefined;
};

const queryObject = (query: URLSearchParams): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const [k, v] of query) if (k !== "secret" && !(k in out)) out[k] = v;
  return out;
};

/** A JSON body keeps its types, an empty body is `{}`, anything else arrives verbatim as a string. */
const bodyValue = (raw: Buffer): unknown => {
  if (raw.length === 0) return {};
  const text = raw.toString("utf8");
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
};

export const graphEndpointRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: EMIT_BODY_LIMIT }, (_req, body, parsed) => parsed(null, body));
  app.post("/api/v1/graph-hooks/:org/:project/:graph/:node", { bodyLimit: EMIT_BODY_LIMIT }, async (req, reply) => {
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
    const result = await withTransaction(deps.pool, (tx) =>
      emitEvent(tx, {
        projectId: endpoint.projectId,
        type,
        key: null,
        payload,
        sourceRunId: null,
        trusted: trustOf({ by: "delivery", trusted: true }),
      }),
    );
    return reply.status(202).send({ event_id: result.eventId, event_type: type });
  });
  done();
};
