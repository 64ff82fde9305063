import type { FastifyInstance } from "fastify";
import { CONSOLE_SESSION_HEADER } from "../auth.js";

/** An API answer the console shows as an error: the API's own status and message. */
export class ApiRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

/**
 * The console reads and writes only through the user API, in process (app.inject): every rule
 * (roles, scope, masking, validation) stays the API's, in one place. The session id stands for
 * the token that opened it (auth.ts).
 */
export const callApi = async <T>(
  app: FastifyInstance,
  session: string,
  req: { method?: "GET" | "POST" | "PUT" | "DELETE"; url: string; body?: unknown },
): Promise<T> => {
  const res = await app.inject({
    method: req.method ?? "GET",
    url: req.url,
    headers: { [CONSOLE_SESSION_HEADER]: session },
    ...(req.body === undefined ? {} : { payload: req.body as Record<string, unknown> }),
  });
  if (res.statusCode >= 400) {
    let message = res.body;
    let field: string | undefined;
    try {
      const e = (JSON.parse(res.body) as { error?: { message?: string; details?: { field?: string } } }).error;
      message = e?.message ?? message;
      field = e?.details?.field;
    } catch {
      // not JSON: the body is the message
    }
    throw new ApiRefusal(res.statusCode, message, field);
  }
  return (res.statusCode === 204 ? undefined : JSON.parse(res.body)) as T;
};

/** `/api/v1/orgs/{org}/projects/{project}` with each name encoded. */
export const apiBase = (org: string, project: string): string =>
  `/api/v1/orgs/${encodeURIComponent(org)}/projects/${encodeURIComponent(project)}`;
