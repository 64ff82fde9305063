import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { ZodError } from "zod";
import { FlowError, describeIssues, httpStatusOf } from "@flowsvc/core";

/** The one place where an error becomes an HTTP status and a body `{error: {code, message, hint?}}`. */
export const toFlowError = (err: unknown): FlowError => {
  if (err instanceof FlowError) return err;
  if (err instanceof ZodError) return new FlowError("invalid_argument", describeIssues(err.issues), { details: { issues: err.issues } });
  const fe = err as Partial<FastifyError>;
  if (fe.code === "FST_ERR_CTP_BODY_TOO_LARGE") return new FlowError("payload_too_large", "request body is over the limit for this route");
  if (fe.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE") return new FlowError("invalid_argument", "send the body as application/json");
  if (typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new FlowError("invalid_argument", fe.message ?? "bad request");
  }
  return new FlowError("internal", "internal error: the server log has the details", { cause: err });
};

export const errorHandler = (err: unknown, req: FastifyRequest, reply: FastifyReply): void => {
  const fe = toFlowError(err);
  if (fe.code === "internal") req.log.error({ err }, "request failed");
  void reply.status(httpStatusOf(fe.code)).send(fe.toJSON());
};

export const notFoundHandler = (req: FastifyRequest, reply: FastifyReply): void => {
  void reply.status(404).send(new FlowError("not_found", `no route ${req.method} ${req.url.split("?")[0]}`).toJSON());
};
