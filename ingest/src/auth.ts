import type { IncomingHttpHeaders } from "node:http";
import type { FastifyRequest } from "fastify";
import type { Pool } from "pg";
import { FlowError } from "@flowsvc/core";
import {
  ROLE_RANK,
  digestToken,
  findCallerByTokenDigest,
  findCallerInProject,
  findConsoleSession,
  type Caller,
  type ProjectRef,
  type Role,
} from "@flowsvc/store";

const LOGIN_HINT =
  "log in with `flow login --url <server url> --token <token>` or set FLOWSVC_TOKEN (the token `flow server` printed at its first start)";

export const bearerOf = (req: { readonly headers: IncomingHttpHeaders }): string | undefined => {
  const h = req.headers.authorization;
  if (!h) return undefined;
  const m = /^Bearer\s+(\S+)$/i.exec(h);
  return m?.[1];
};

/**
 * The web console's internal requests (ingest/src/console/api.ts, through app.inject) carry the
 * session id instead of a bearer token; the session stands for the token that opened it, so every
 * route's rule (role, scope, masking) is the API's own. A browser cannot set this header across
 * sites without a CORS preflight, which ingest never grants, so it is no CSRF vector.
 */
export const CONSOLE_SESSION_HEADER = "x-flowsvc-console-session";

/** The digest of the token behind the request: a bearer token's, or a live console session's token. */
const presentedDigest = async (pool: Pool, req: FastifyRequest): Promise<Buffer> => {
  const session = req.headers[CONSOLE_SESSION_HEADER];
  if (typeof session === "string" && !bearerOf(req)) {
    const s = await findConsoleSession(pool, digestToken(session));
    if (!s) throw new FlowError("unauthenticated", "the console session has ended", { hint: "log in again" });
    return s.tokenDigest;
  }
  const token = bearerOf(req);
  if (!token) throw new FlowError("unauthenticated", "no API token was sent (Authorization: Bearer <token>)", { hint: LOGIN_HINT });
  return digestToken(token);
};

const invalidToken = (): FlowError => new FlowError("unauthenticated", "the API token is not valid for this server", { hint: LOGIN_HINT });

export const authenticateUser = async (pool: Pool, req: FastifyRequest): Promise<Caller> => (await authenticateUserToken(pool, req)).caller;

/** The caller and the digest of the token they presented (a console session's token for the console): the token routes mark and guard that one. */
export const authenticateUserToken = async (pool: Pool, req: FastifyRequest): Promise<{ caller: Caller; digest: Buffer }> => {
  const digest = await presentedDigest(pool, req);
  const caller = await findCallerByTokenDigest(pool, digest);
  if (!caller) throw invalidToken();
  return { caller, digest };
};

export interface Scope extends ProjectRef {
  caller: Caller;
  role: Role;
}

/**
 * Resolves `/orgs/:org/projects/:project` for the caller and checks the role the route needs.
 * A project the caller is not a member of is reported as not found, so names do not leak.
 */
export const authorize = async (pool: Pool, req: FastifyRequest, need: Role): Promise<Scope> => {
  const digest = await presentedDigest(pool, req);
  const { org, project } = req.params as { org: string; project: string };
  // One round trip for the token, the project and the role: every API call pays for it.
  const { caller, project: ref, role } = await findCallerInProject(pool, digest, org, project);
  if (!caller) throw invalidToken();
  if (!ref || !role)
    throw new FlowError("not_found", `project ${org}/${project} not found`, { hint: "check --project (org/project) or FLOWSVC_PROJECT" });
  if (ROLE_RANK[role] < ROLE_RANK[need]) {
    throw new FlowError("forbidden", `this needs the ${need} role on ${org}/${project}; ${caller.userName} is ${role}`, {
      hint: "ask a project admin for the role",
    });
  }
  return { ...ref, caller, role };
};
