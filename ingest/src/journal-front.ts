/**
 * Step records served in front of Fastify (issue 15 item 3: a `flow step` is one socket exchange
 * and one durable commit). Every `flow step` of every script is one `POST /agent/v1/journal`, and
 * on the step's critical path Fastify's per-request machinery (its Request and Reply, the router,
 * the onRequest, onSend and onResponse chains, a pino child per request) was most of the server's
 * own JS for it. The node:http server's request listener (app.ts) gives a plain record to the
 * journal route's serving code (routes/agent.ts `serveJournal`) and every other request to Fastify.
 *
 * Only requests whose every answer is decided by the route alone are taken: exactly `POST
 * /agent/v1/journal` (no query string, no percent-encoding: nothing for the router or the input
 * guard to decide), with a Content-Length within the route's body limit (no chunked body, so no
 * 413 can arise while reading), `Content-Type: application/json` as the agent sends it, and no
 * Accept-Version (the router's constraint). Anything else, and everything while the app closes,
 * goes to Fastify, which answers it as it always did. What the route does with the request (the
 * token, the body's parse and checks, the record, the 409 of a lost job, the determinism refusal,
 * the error's answer, X-Request-Id, the HTTP and step metrics) is one piece of code for both ways
 * in; `app.inject()` reaches it through Fastify, a socket through this front
 * (ingest/src/journal-front.test.ts compares them answer by answer).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Front } from "./front-io.js";

/** The journal route's path (its metrics label too). */
export const JOURNAL_ROUTE = "/agent/v1/journal";

/** Journal entries may be large (a step's stdout, up to 2 MiB as base64 and more); the rest of the agent API keeps the default 1 MiB. */
export const AGENT_BODY_LIMIT = 8 * 1024 * 1024;

/** Serves one record whose body is still to be read. */
export type ServeJournal = (req: IncomingMessage, res: ServerResponse) => void;

/** Whether nothing about the request but the route itself can decide its answer (see the file's comment). */
const plainHeaders = (req: IncomingMessage): boolean => {
  const h = req.headers;
  const length = h["content-length"];
  if (length === undefined || !/^\d{1,8}$/.test(length) || Number(length) > AGENT_BODY_LIMIT) return false;
  if (h["transfer-encoding"] !== undefined || h["accept-version"] !== undefined) return false;
  return h["content-type"] === "application/json";
};

export class JournalFront extends Front<ServeJournal> {
  /** Serves the request when it is a plain step record and answers true; false leaves it to Fastify, untouched. */
  take(req: IncomingMessage, res: ServerResponse): boolean {
    const serve = this.serving;
    if (serve === undefined || req.method !== "POST" || req.url !== JOURNAL_ROUTE || !plainHeaders(req)) return false;
    this.served();
    serve(req, res);
    return true;
  }
}
