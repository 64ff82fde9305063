/**
 * `/api/v1/tokens` (`flow token create|ls|rm`, README "Roles"): a user's own API tokens. Any user
 * token may call (no project role: a token belongs to its user, not to a project); a job token is
 * none (it is no api_tokens row) and gets 401. A token is shown once, in the answer that makes it;
 * the list never holds a token or its digest. Removing a token revokes it at once (its row goes);
 * another user's token id answers not_found, as one that never existed. The token making the
 * request is refused unless `?force=true`: removing it logs the caller out.
 */
import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import { TOKEN_LABEL_JSON_SCHEMA, assertTokenId, assertTokenLabel } from "@flowsvc/core";
import { createToken, listTokens, revokeToken } from "@flowsvc/store";
import { authenticateUserToken } from "../auth.js";
import type { IngestDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";
import { parsedOr400 } from "../errors.js";

const TokenBody = z.strictObject({
  label: z
    .string()
    .meta({ ...TOKEN_LABEL_JSON_SCHEMA })
    .optional()
    .describe("what the token is for (1 to 100 characters on one line); default `created by <user>`"),
});
const TokenParams = z.object({ id: z.string().describe("the token's id (tok-...), from GET /api/v1/tokens") });
const RemoveQuery = z.object({
  force: z.enum(["true", "false"]).optional().describe("true to remove the token making this request (it logs you out)"),
});

const TokenInfo = z.object({
  id: z.string(),
  label: z.string(),
  created_at: z.string(),
  last_used_at: z.string().nullable().describe("to the minute: a token's use is recorded at most once a minute"),
  current: z.boolean().describe("the token making this request"),
});
const NewToken = z.object({
  id: z.string(),
  label: z.string(),
  created_at: z.string(),
  token: z.string().describe("the token: shown this once, only its digest is stored"),
});

const createDoc = api({
  summary: "Make a new API token for the caller (shown once)",
  tag: "tokens",
  auth: "user",
  body: TokenBody,
  response: { status: 201, schema: NewToken },
});
const listDoc = api({
  summary: "The caller's API tokens: id, label, created, last used (never the token or its digest)",
  tag: "tokens",
  auth: "user",
  response: { schema: z.array(TokenInfo) },
});
const removeDoc = api({
  summary: "Revoke one of the caller's tokens at once; the token making the request only with force=true",
  description: "Another user's token id answers 404, as one that does not exist.",
  tag: "tokens",
  auth: "user",
  params: TokenParams,
  query: RemoveQuery,
  errors: [404, 409],
});

export const tokenRoutes: FastifyPluginCallback<IngestDeps> = (app, deps, done) => {
  const { pool } = deps;
  const base = "/api/v1/tokens";

  app.post(base, createDoc, async (req, reply) => {
    const { caller } = await authenticateUserToken(pool, req);
    const { label = `created by ${caller.userName}` } = parsedOr400(TokenBody, req.body ?? {}, "body");
    assertTokenLabel(label);
    const t = await createToken(pool, { userId: caller.userId, label });
    req.log.info({ user: caller.userName, token_id: t.id }, "token created");
    return reply.status(201).send(t);
  });

  app.get(base, listDoc, async (req) => {
    const { caller, digest } = await authenticateUserToken(pool, req);
    return listTokens(pool, { userId: caller.userId, currentDigest: digest });
  });

  app.delete(`${base}/:id`, removeDoc, async (req) => {
    const { caller, digest } = await authenticateUserToken(pool, req);
    const { id } = parsedOr400(TokenParams, req.params, "id");
    assertTokenId(id);
    const { force } = parsedOr400(RemoveQuery, req.query, "force");
    await revokeToken(pool, { userId: caller.userId, id, currentDigest: digest, force: force === "true" });
    req.log.info({ user: caller.userName, token_id: id }, "token revoked");
    return { id, revoked: true };
  });
  done();
};
