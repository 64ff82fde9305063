/**
 * Hook deliveries served in front of Fastify (issue 15 item 2). At 32 senders the server's one
 * thread is the limit, and Fastify's per-request machinery (its Request and Reply, the router, the
 * hook chains, the content-type parser, a pino child per request) was ~10% of the server's busy
 * samples at 32 senders (profiled; the server's samples per delivery fell ~15% without it). The node:http server's request listener (buildApp's `serverFactory`) gives a plain
 * delivery to the hook route's own serving code (routes/hook-ingest.ts `serveDelivery`) and every
 * other request to Fastify.
 *
 * Only requests whose every answer is decided by the route alone are taken: `POST
 * /api/v1/hooks/{org}/{project}/{name}` whose segments are 1-100 unreserved characters (no
 * percent-encoding: nothing for the router to decode or refuse), whose query string passes the
 * input guard, with a Content-Length within the route's body limit (no chunked body, so no 413
 * can arise while reading), a well-formed media type or none, and no Accept-Version (the router's
 * constraint). Anything else, and everything while the app closes, goes to Fastify, which answers
 * it as it always did (the same route, the same checks). What the route does once it has the
 * body (the secret or signature, the commit, the 202, the refusals and their counters and log
 * lines, X-Request-Id, the HTTP metrics) is one piece of code for both ways in; `app.inject()`
 * reaches it through Fastify, a socket through this front (ingest/src/hook-front.test.ts compares
 * them answer by answer).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { EMIT_BODY_LIMIT, pathParamProblem, queryProblem } from "@flowsvc/core";
import { Front } from "./front-io.js";

/** The hook delivery route's path template (its metrics label). */
export const HOOK_ROUTE = "/api/v1/hooks/:org/:project/:name";

/** Where a delivery goes. */
export interface HookTarget {
  org: string;
  project: string;
  name: string;
}

/** Serves one delivery whose body is still to be read; `query` is the URL's query string without `?` ("" when none). */
export type ServeDelivery = (req: IncomingMessage, res: ServerResponse, call: { target: HookTarget; query: string | undefined }) => void;

const SEGMENT = "([A-Za-z0-9._~-]{1,100})";
const PLAIN_DELIVERY = new RegExp(`^/api/v1/hooks/${SEGMENT}/${SEGMENT}/${SEGMENT}(?:\\?(.*))?$`, "s");
/** A media type with at most a charset: always one Fastify's content-type check takes as valid. */
const PLAIN_MEDIA_TYPE = /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+(?: *; *charset=[A-Za-z0-9_.-]+)?$/;

/** Whether nothing about the request but the route itself can decide its answer (see the file's comment). */
const plainHeaders = (req: IncomingMessage): boolean => {
  const h = req.headers;
  const length = h["content-length"];
  if (length === undefined || !/^\d{1,8}$/.test(length) || Number(length) > EMIT_BODY_LIMIT) return false;
  if (h["transfer-encoding"] !== undefined || h["accept-version"] !== undefined) return false;
  const type = h["content-type"];
  return type === undefined || PLAIN_MEDIA_TYPE.test(type);
};

export class HookFront extends Front<ServeDelivery> {
  /** Serves the request when it is a plain hook delivery and answers true; false leaves it to Fastify, untouched. */
  take(req: IncomingMessage, res: ServerResponse): boolean {
    const serve = this.serving;
    if (serve === undefined || req.method !== "POST" || !req.url?.startsWith("/api/v1/hooks/")) return false;
    const m = PLAIN_DELIVERY.exec(req.url);
    if (!m || !plainHeaders(req)) return false;
    const target = { org: m[1]!, project: m[2]!, name: m[3]! };
    const query = m[4];
    if (pathParamProblem(target) !== undefined || (query !== undefined && queryProblem(query) !== undefined)) return false;
    this.served();
    serve(req, res, { target, query });
    return true;
  }
}
