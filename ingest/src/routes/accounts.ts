import { z } from "zod";
import type { FastifyPluginCallback, FastifyReply, FastifyRequest } from "fastify";
import { randomBytes } from "node:crypto";
import {
  FlowError,
  CREDENTIAL_NAME_JSON_SCHEMA,
  assertCredentialName,
  refreshAfterMs,
  tokenLifetimeSecs,
  type AccountProvider,
  type AccountTokens,
} from "@flowsvc/core";
import {
  OAUTH_STATE_TTL_SECS,
  accountGranter,
  connectionHolder,
  createOAuthState,
  disableAccount,
  forgetAccount,
  listAccounts,
  saveGrantedAccount,
  takeOAuthState,
} from "@flowsvc/store";
import { authorizeUrl, exchangeCode, newPkce, readIdentity, revokeToken } from "@flowsvc/controller";
import { authorize, type Scope } from "../auth.js";
import { api } from "../openapi/route-doc.js";
import type { RouteDeps } from "../deps.js";
import { consoleReturnOf, flashCookies, type Flash } from "../console/flash.js";
import { parsedOr400 } from "../errors.js";

/**
 * The cookie that binds a connect's `state` to the browser that started it when the caller passes
 * no session id of its own (the console passes its login session's id instead). Path-scoped to the
 * callback, httpOnly, SameSite=Lax (the provider's redirect back is a top-level GET).
 */
export const OAUTH_SESSION_COOKIE = "flowsvc_oauth_session";
/** The one redirect URI's path: `FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI` must end in it. */
export const OAUTH_CALLBACK_PATH = "/oauth/callback";

/**
 * A text field whose absence reads "is required"; any other problem keeps zod's own message (a
 * schema-wide `error: "is required"` also answered a 5,000-character state, a state given twice
 * and a name sent as a number with "is required").
 */
const requiredText = () => z.string({ error: (issue) => (issue.input === undefined ? "is required" : undefined) });

const ConnectBody = z.strictObject({
  // The name's rule is assertCredentialName's (after parsing); the API's description says it too (meta).
  name: requiredText().meta({ ...CREDENTIAL_NAME_JSON_SCHEMA }),
  provider: requiredText(),
  /** The caller's own browser-session id to bind the state to (the console's); else a cookie is set. */
  session_id: z.string().min(16, "must be at least 16 characters").max(256).optional(),
});

const CallbackQuery = z.object({
  state: requiredText().max(512),
  code: z.string().max(4096).optional(),
  error: z.string().max(256).optional(),
  error_description: z.string().max(1024).optional(),
  iss: z.string().max(2048).optional(),
});

const NameParams = z.object({ name: z.string() });

const cookieOf = (req: FastifyRequest, name: string): string | undefined => {
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
};

const providerOr404 = (providers: ReadonlyMap<string, AccountProvider>, name: string): AccountProvider => {
  const p = providers.get(name);
  if (p) return p;
  if (providers.size === 0)
    throw new FlowError("invalid_argument", "connecting accounts is not offered here: the operator configured no provider", {
      hint: "set FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS and FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI on the server",
      details: { field: "provider" },
    });
  throw new FlowError(
    "invalid_argument",
    `provider: no provider named ${JSON.stringify(name.slice(0, 64))} is configured (configured: ${[...providers.keys()].join(", ")})`,
    {
      details: { field: "provider" },
    },
  );
};

/** Best effort: tokens the server will not keep are revoked at the provider, so no grant is left dangling. */
const discard = async (p: AccountProvider, tokens: AccountTokens): Promise<void> => {
  await revokeToken(p, tokens.refresh_token ?? tokens.access_token);
};

/** The routes' OpenAPI descriptions (ingest/src/openapi/route-doc.ts). */
const listDoc = api({
  summary: "List connected accounts: name, provider, far-side account, status; never a token",
  tag: "accounts",
  auth: "viewer",
});
const connectDoc = api({
  summary: "Start connecting an account: the provider's authorize URL (PKCE S256, a single-use state bound to the browser)",
  tag: "accounts",
  auth: "member",
  body: ConnectBody,
});
const removeDoc = api({
  summary: "Remove a connected account (admin or its granter); revokes at the provider",
  tag: "accounts",
  auth: "member",
  params: NameParams,
});
const disableDoc = api({
  summary: "Switch a connected account off by hand (admin or its granter): disabled, never renewed, until reconnected",
  description:
    "Nodes, jobs and scripts naming a disabled account fail with a message to reconnect, and nothing is sent. The tokens are kept (not revoked); reconnecting under the same name to the same far-side account makes it usable again.",
  tag: "accounts",
  auth: "member",
  params: NameParams,
  body: null,
});

/**
 * The account the path names, when the caller may manage it (remove or disable): an admin, or the
 * member who granted it. 404 when the project has no account of that name.
 */
const manageable = async (pool: RouteDeps["pool"], req: FastifyRequest, f: { scope: Scope; verb: string }): Promise<string> => {
  const { scope } = f;
  const { name } = NameParams.parse(req.params);
  assertCredentialName(name);
  const granter = await accountGranter(pool, scope.projectId, name);
  if (granter === undefined)
    throw new FlowError("not_found", `no connected account ${name} in ${scope.org}/${scope.project}`, {
      hint: "list them with `flow account list`",
    });
  if (scope.role !== "admin" && granter !== scope.caller.userId)
    throw new FlowError("forbidden", `${f.verb} connected account ${name} needs the admin role or to be its granter`, {
      hint: "ask a project admin",
    });
  return name;
};

/**
 * Connected accounts (spec, "Connected account"): connecting is a browser flow (authorization code
 * with PKCE S256 and a single-use, session-bound, short-lived `state`); the API lists and removes.
 * No route answers a token. Roles: viewer lists; a member connects (and so becomes the granter);
 * an admin or the account's granter removes or disables (switches it off until a reconnect).
 */
export const accountRoutes: FastifyPluginCallback<RouteDeps> = (app, deps, done) => {
  const { pool, keyring } = deps;
  const providers = deps.accounts?.providers ?? new Map<string, AccountProvider>();
  const redirectUri = deps.accounts?.redirectUri;
  const base = "/api/v1/orgs/:org/projects/:project/accounts";

  app.get(base, listDoc, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    return listAccounts(pool, scope.projectId);
  });

  app.post(`${base}/connect`, connectDoc, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const body = parsedOr400(ConnectBody, req.body ?? {}, "body");
    const { name, provider: providerName } = body;
    assertCredentialName(name);
    const provider = providerOr404(providers, providerName);
    // Refused now rather than after the consent; the callback's claim checks it again.
    if ((await connectionHolder(pool, scope.projectId, name)) === "credential")
      throw new FlowError(
        "conflict",
        `the name ${name} is already taken by a credential in this project: credentials and connected accounts share one name space`,
        {
          hint: `choose another name, or remove the credential first (flow credential rm ${name})`,
          details: { field: "name" },
        },
      );
    const sessionId = body.session_id ?? randomBytes(32).toString("base64url");
    const pkce = await newPkce();
    const state = await createOAuthState(pool, keyring, {
      scope: { orgId: scope.orgId, projectId: scope.projectId },
      userId: scope.caller.userId,
      sessionId,
      name,
      provider: provider.name,
      codeVerifier: pkce.verifier,
    });
    if (body.session_id === undefined) setSessionCookie(reply, sessionId, redirectUri);
    return {
      authorize_url: authorizeUrl(provider, { redirectUri: redirectUri!, state, challenge: pkce.challenge }),
      expires_in: OAUTH_STATE_TTL_SECS,
    };
  });

  // JSON for an API caller; a connect started on the console goes back to its Connections page (303) with the outcome.
  app.get(OAUTH_CALLBACK_PATH, async (req, reply) => {
    const back = consoleReturnOf(req);
    if (back === undefined) return finishConnect(deps, req);
    const flash = await finishConnect(deps, req).then(connectedFlash, (err: unknown) => refusedFlash(req, err));
    return reply
      .code(303)
      .header("set-cookie", flashCookies(flash, redirectUri?.startsWith("https:") ?? false))
      .header("cache-control", "no-store")
      .header("location", back)
      .send();
  });

  // Switched off by hand (spec, "Connected account status"): `disabled` until a reconnect; a second disable changes nothing.
  app.post(`${base}/:name/disable`, disableDoc, async (req) => {
    const scope = await authorize(pool, req, "member");
    const name = await manageable(pool, req, { scope, verb: "disabling" });
    const changed = await disableAccount(pool, { projectId: scope.projectId, name });
    if (changed)
      req.log.info({ account: name, project: scope.projectId, caller: scope.caller.userName }, "connected account disabled by hand");
    return { name, status: "disabled", changed };
  });

  app.delete(`${base}/:name`, removeDoc, async (req) => {
    const scope = await authorize(pool, req, "member");
    const name = await manageable(pool, req, { scope, verb: "removing" });
    const gone = await forgetAccount(pool, keyring, { scope: { orgId: scope.orgId, projectId: scope.projectId }, name });
    if (!gone) throw new FlowError("not_found", `no connected account ${name} in ${scope.org}/${scope.project}`);
    const provider = providers.get(gone.provider);
    const revoked =
      provider !== undefined &&
      gone.tokens !== undefined &&
      (await revokeToken(provider, gone.tokens.refresh_token ?? gone.tokens.access_token));
    return { name, revoked };
  });
  done();
};

const connectedFlash = (a: { name: string; provider: string; far_label: string; status: string }): Flash => ({
  ok: true,
  text: `connected ${a.name}: ${a.provider} account ${a.far_label} (${a.status})`,
});

/** Why a console's connect was refused, for its page: the refusal's own message; an unexpected error is logged, not shown. */
const refusedFlash = (req: FastifyRequest, err: unknown): Flash => {
  if (err instanceof FlowError && err.code !== "internal") return { ok: false, text: `connecting was refused: ${err.message}` };
  req.log.error({ err }, "connected account callback failed");
  return { ok: false, text: "connecting failed: an internal error (the server log has it); try again" };
};

const setSessionCookie = (reply: FastifyReply, sessionId: string, redirectUri: string | undefined): void => {
  const secure = redirectUri?.startsWith("https:") ? "; Secure" : "";
  void reply.header(
    "set-cookie",
    `${OAUTH_SESSION_COOKIE}=${sessionId}; Path=${OAUTH_CALLBACK_PATH}; Max-Age=${OAUTH_STATE_TTL_SECS}; HttpOnly; SameSite=Lax${secure}`,
  );
};

/**
 * `GET /oauth/callback`: takes the state (single-use, session-bound), exchanges the code with the
 * PKCE verifier, reads the identity, and stores the account. Tokens it will not keep are revoked.
 */
const finishConnect = async (deps: RouteDeps, req: FastifyRequest) => {
  const { pool, keyring } = deps;
  const providers = deps.accounts?.providers ?? new Map<string, AccountProvider>();
  const redirectUri = deps.accounts?.redirectUri;
  const query = parsedOr400(CallbackQuery, req.query, "query");
  const sessionId = cookieOf(req, OAUTH_SESSION_COOKIE) ?? cookieOf(req, "flowsvc_session") ?? "";
  const taken = await takeOAuthState(pool, keyring, { state: query.state, sessionId });
  const provider = providerOr404(providers, taken.provider);
  const granted = await exchangeCode(provider, {
    redirectUri: redirectUri!,
    callbackParams: new URLSearchParams(req.query as Record<string, string>),
    state: query.state,
    verifier: taken.codeVerifier,
  });
  // A failing identity lookup never authorises anything: the tokens are dropped (and revoked).
  const identity = await readIdentity(provider, granted.tokens.access_token).catch(async (err: unknown) => {
    await discard(provider, granted.tokens);
    throw err;
  });
  const now = Date.now();
  const lifetime = tokenLifetimeSecs(granted.expiresIn, provider.assumed_lifetime_secs);
  const account = await saveGrantedAccount(pool, keyring, {
    scope: taken.scope,
    name: taken.name,
    provider: provider.name,
    farId: identity.farId,
    farLabel: identity.farLabel,
    granterId: taken.userId,
    tokens: granted.tokens,
    expiresAtMs: lifetime === undefined ? null : now + lifetime * 1000,
    refreshAfterMs: refreshAfterMs(now, lifetime) ?? null,
  }).catch(async (err: unknown) => {
    await discard(provider, granted.tokens);
    throw err;
  });
  return { name: account.name, provider: account.provider, far_label: account.far_label, status: account.status };
};
