import { STATUS_CODES, maxHeaderSize } from "node:http";
import type { Socket } from "node:net";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { ZodError, type z } from "zod";
import { FlowError, describeIssues, httpStatusOf } from "@flowsvc/core";

/** `3.1 MiB`, `512 KiB`, `900 bytes`: a size as a 413 message states it. */
export const formatBytes = (n: number): string => {
  if (n >= 1024 * 1024) return `${Number((n / (1024 * 1024)).toFixed(1))} MiB`;
  if (n >= 1024) return `${Number((n / 1024).toFixed(1))} KiB`;
  return `${n} bytes`;
};

const pathOf = (req: FastifyRequest | undefined): string => {
  const path = req?.url.split("?")[0] ?? "";
  return path.length > 200 ? `${path.slice(0, 200)}...` : path;
};

/** The 413 names the limit and, when the sender declared it, the body's size. */
const tooLarge = (req: FastifyRequest | undefined): FlowError => {
  const limit = req?.routeOptions.bodyLimit;
  const declared = Number(req?.headers["content-length"]);
  const sized = Number.isFinite(declared) && declared > 0;
  const route = `${req?.method ?? ""} ${pathOf(req)}`;
  const message =
    limit === undefined
      ? "the request body is over the limit for this route"
      : sized
        ? `the request body is ${formatBytes(declared)}; the limit for ${route} is ${formatBytes(limit)}`
        : `the request body is over ${formatBytes(limit)}, the limit for ${route}`;
  return new FlowError("payload_too_large", message, {
    details: limit === undefined ? {} : { limit_bytes: limit, ...(sized ? { size_bytes: declared } : {}) },
  });
};

/** Fastify's own refusals (parser, router), in our shape. */
const fromFastify = (fe: Partial<FastifyError>, req: FastifyRequest | undefined): FlowError | undefined => {
  switch (fe.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return tooLarge(req);
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new FlowError("invalid_argument", "send the body as application/json");
    case "FST_ERR_BAD_URL":
      return new FlowError(
        "invalid_argument",
        `the path ${pathOf(req)} is not valid percent-encoding: % takes two hex digits, and the bytes must be UTF-8`,
      );
    case "FST_ERR_MAX_PARAM_LENGTH":
      return new FlowError("uri_too_long", `a segment of the path ${pathOf(req)} is over 100 characters, the most a name or id may have`);
    default:
      return undefined;
  }
};

/** SQLSTATE disk_full: Postgres could not extend a file; the statement (and its transaction) wrote nothing. */
const PG_DISK_FULL = "53100";

/**
 * The statement's connection to Postgres was lost: a terminated backend (admin_shutdown 57P01,
 * crash_shutdown 57P02, cannot_connect_now 57P03), a connection exception (class 08), or pg's own
 * word that the socket closed under it. Transient, not a bug; whether a COMMIT in flight took
 * effect is unknown, so the answer does not say nothing was recorded.
 */
const lostDatabaseConnection = (err: unknown): boolean => {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === "string") return /^57P0[123]$/.test(code) || /^08[0-9A-Z]{3}$/.test(code);
  return (
    err instanceof Error &&
    typeof message === "string" &&
    /^(Connection terminated unexpectedly|Client has encountered a connection error and is not queryable)$/.test(message)
  );
};

/** A value by its schema, or the 400 that names what is wrong with it (describeIssues) and where (`details.field`). */
export const parsedOr400 = <T>(schema: z.ZodType<T>, value: unknown, field: string): T => {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new FlowError("invalid_argument", describeIssues(parsed.error.issues), { details: { field } });
  return parsed.data;
};

/** The one place where an error becomes an HTTP status and a body `{error: {code, message, hint?}}`. */
export const toFlowError = (err: unknown, req?: FastifyRequest): FlowError => {
  if (err instanceof FlowError) return err;
  if (err instanceof ZodError) return new FlowError("invalid_argument", describeIssues(err.issues), { details: { issues: err.issues } });
  if ((err as { code?: unknown } | null)?.code === PG_DISK_FULL) {
    return new FlowError("unavailable", "the database's disk is full: nothing was recorded", {
      hint: "free space where the server's data dir (or its Postgres) lives, then send it again",
      cause: err,
    });
  }
  if (lostDatabaseConnection(err)) {
    return new FlowError("unavailable", "the server lost its connection to the database: the request may not have been recorded", {
      hint: "send it again (a submit with the same idempotency key is recorded once)",
      cause: err,
    });
  }
  const fe = err as Partial<FastifyError>;
  const known = fromFastify(fe, req);
  if (known) return known;
  if (typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new FlowError("invalid_argument", fe.message ?? "bad request");
  }
  return new FlowError("internal", "internal error: the server log has the details", { cause: err });
};

export const errorHandler = (err: unknown, req: FastifyRequest, reply: FastifyReply): void => {
  const fe = toFlowError(err, req);
  if (fe.code === "internal") req.log.error({ err }, "request failed");
  void reply.status(httpStatusOf(fe.code)).send(fe.toJSON());
};

export const notFoundHandler = (req: FastifyRequest, reply: FastifyReply): void => {
  void reply.status(404).send(new FlowError("not_found", `no route ${req.method} ${req.url.split("?")[0]}`).toJSON());
};

/** What Node's HTTP parser refuses before Fastify sees a request (too-large headers, a stalled sender, malformed HTTP). */
const clientFlowError = (code: string | undefined): FlowError => {
  if (code === "HPE_HEADER_OVERFLOW") {
    return new FlowError("headers_too_large", `the request line and headers are over ${formatBytes(maxHeaderSize)} (the URL counts)`, {
      hint: "send a shorter URL or fewer headers; a body has its own, larger limit",
      details: { limit_bytes: maxHeaderSize },
    });
  }
  if (code === "ERR_HTTP_REQUEST_TIMEOUT") return new FlowError("request_timeout", "the request did not arrive in time");
  return new FlowError("invalid_argument", `the request is not valid HTTP/1.1${code ? ` (${code})` : ""}`);
};

/**
 * The server's `clientError` listener (Fastify's `clientErrorHandler` option): answers in the same
 * error shape as every other error, then closes the connection, as Node itself would.
 */
export const clientErrorHandler = (err: NodeJS.ErrnoException, socket: Socket): void => {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const fe = clientFlowError(err.code);
  const status = httpStatusOf(fe.code);
  const body = JSON.stringify(fe.toJSON());
  // end, not write-then-destroy: the answer is flushed before the connection closes.
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
};
