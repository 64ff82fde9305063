/**
 * What the fronts (hook-front.ts, journal-front.ts) share to serve a request from the socket the
 * way Fastify does: the body read as its parser reads it, the answer written as its reply writes
 * JSON, and the one JSON body parser both ways in use (Fastify's own, then core's storable check).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from "fastify";
import { FlowError, REQUEST_ID_HEADER, assertStorableJson, httpStatusOf, saneRequestId } from "@flowsvc/core";
import { mintId, type ServiceMetrics } from "@flowsvc/store";
import { toFlowError } from "./errors.js";
import { observeAnswer } from "./observability.js";

/** The body as Fastify's parser reads it (a copy, never a view of the socket's buffer); a front takes only a declared length within the limit. */
export const readBody = (req: IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    req.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      length += chunk.length;
    });
    req.once("end", () => resolve(Buffer.concat(chunks, length)));
    req.once("error", (err: Error & { statusCode?: number }) => {
      // As Fastify's parser: a body that broke off is the sender's error (400), and the connection closes.
      if (!(typeof err.statusCode === "number" && err.statusCode >= 400)) err.statusCode = 400;
      reject(err);
    });
  });

/** JSON as Fastify answers it, with the request id every answer carries; `close`: the connection closes after it. */
export const answer = (
  res: ServerResponse,
  { status, payload, id, close }: { status: number; payload: unknown; id: string; close?: boolean },
): void => {
  const body = JSON.stringify(payload);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    [REQUEST_ID_HEADER]: id,
    ...(close ? { connection: "close" } : {}),
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
};

/** A JSON body's text to its value, or the parser's error (thrown) that Fastify would have answered. */
export type JsonBodyParser = (text: string, req?: FastifyRequest) => unknown;

/**
 * The application/json parser: Fastify's default one (a prototype-poisoning key is refused, an
 * empty body too), then core's check that Postgres can store the value (NUL, lone surrogates,
 * nesting). guardInput (app.ts) gives it to Fastify; a front calls it on the body it read.
 */
export const storableJsonParser = (app: FastifyInstance): JsonBodyParser => {
  const parseJson = app.getDefaultJsonParser("error", "error");
  return (text, req) => {
    let settled: { err: Error | null; value: unknown } | undefined;
    // Fastify's default parser answers synchronously and does not read the request.
    void parseJson(req as FastifyRequest, text, (err, value) => (settled = { err, value: value as unknown }));
    if (settled === undefined) throw new FlowError("internal", "the JSON body parser did not answer synchronously");
    if (settled.err) throw settled.err;
    return assertStorableJson(settled.value);
  };
};

/** A front's route: what it makes of one request's body, and its bookkeeping around the answer. */
export interface FrontRoute<B, T> {
  /** The route's path template (its metrics label). */
  readonly route: string;
  /** The request's log, with its request id (made on first use: a request that logs nothing makes none). */
  readonly log: () => FastifyBaseLogger;
  /** The body's bytes to what the route reads; a throw is the parser's refusal (the connection closes after its answer, as Fastify's). */
  parse(raw: Buffer): B;
  /** The route's work; what it throws is answered as its FlowError. */
  handle(body: B): Promise<T>;
  /** The answer to what the work gave. */
  ok(out: T): { status: number; payload: unknown };
  /** Bookkeeping once the answer is written (counters, log lines). */
  afterOk?(out: T): void;
  /** A refusal's bookkeeping, before its answer. */
  refused?(err: unknown, code: string): void;
}

/**
 * Serves one request from the socket as Fastify's chain does for the route: the request id (the
 * sender's, when sane), the body read and parsed, the route's work, the answer or the error's
 * answer (an internal error logged), the HTTP metrics by the one rule the onResponse hook applies.
 * `route(id)` gives the route's part, with the request's id for its log.
 */
export const serveFront = <B, T>(
  req: IncomingMessage,
  res: ServerResponse,
  { metrics, route: routeFor }: { metrics: ServiceMetrics; route: (id: string) => FrontRoute<B, T> },
): void => {
  const started = performance.now();
  const id = saneRequestId(req.headers[REQUEST_ID_HEADER]) ?? mintId("req");
  const route = routeFor(id);
  let body: B | undefined;
  // As Fastify's parser: a body that broke off or did not parse closes the connection with its answer.
  let parsed = false;
  const answered = (status: number): void =>
    observeAnswer(metrics, { method: "POST", route: route.route, status, seconds: (performance.now() - started) / 1000, body });
  readBody(req)
    .then((raw) => {
      body = route.parse(raw);
      parsed = true;
      return route.handle(body);
    })
    .then(
      (out) => {
        const { status, payload } = route.ok(out);
        answer(res, { status, payload, id });
        answered(status);
        route.afterOk?.(out);
      },
      (err: unknown) => {
        const fe = toFlowError(err);
        route.refused?.(err, fe.code);
        if (fe.code === "internal") route.log().error({ err }, "request failed");
        if (res.headersSent) return;
        answer(res, { status: httpStatusOf(fe.code), payload: fe.toJSON(), id, close: !parsed });
        answered(httpStatusOf(fe.code));
      },
    )
    .catch((err: unknown) => route.log().error({ err, route: route.route }, "bookkeeping after the answer failed"));
};

/**
 * What every front is: it serves nothing until the route installs its serving code, nothing once
 * the app closes (Fastify answers those), and it counts what it served.
 */
export class Front<Serve> {
  #serve: Serve | undefined;
  #closing = false;
  #taken = 0;

  /** Requests this front has served (the rest went to Fastify). */
  get taken(): number {
    return this.#taken;
  }

  /** The route's serving code (the route installs it when the app is built). */
  install(serve: Serve): void {
    this.#serve = serve;
  }

  /** From now on every request goes to Fastify (it answers those of a closing app). */
  close(): void {
    this.#closing = true;
  }

  /** The serving code while the app is open; undefined leaves the request to Fastify. */
  protected get serving(): Serve | undefined {
    return this.#closing ? undefined : this.#serve;
  }

  /** Counts one request served. */
  protected served(): void {
    this.#taken++;
  }
}
