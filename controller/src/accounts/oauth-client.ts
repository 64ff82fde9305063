/**
 * The OAuth 2 protocol calls of connected accounts, through `oauth4webapi` (authorization code with
 * PKCE S256, refresh, revocation; spec "Connected account", SECURITY.md "Connected accounts"). The
 * provider comes from core's parsed configuration; nothing here stores anything: the ingest routes
 * (connect, callback, remove) and the renewal loop call these and write through the store.
 */
import * as oauth from "oauth4webapi";
import { FlowError, readJsonPointer, type AccountProvider, type AccountTokens, type RefreshOutcome } from "@flowsvc/core";
import { NoAnswerError, sendingFetch } from "./sending-fetch.js";

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

const serverOf = (p: AccountProvider): oauth.AuthorizationServer => ({
  issuer: new URL(p.authorize_url).origin,
  authorization_endpoint: p.authorize_url,
  token_endpoint: p.token_url,
  ...(p.revoke_url ? { revocation_endpoint: p.revoke_url } : {}),
});

const clientOf = (p: AccountProvider): oauth.Client => ({ client_id: p.client_id });

/** Request options: our fetch, and plain http only where core's config rule allows it (loopback). */
const optionsFor = (url: string, timeoutMs?: number) => ({
  [oauth.customFetch]: (input: string, init: RequestInit) => sendingFetch(input, init, timeoutMs),
  [oauth.allowInsecureRequests]: LOOPBACK.has(new URL(url).hostname),
});

/** A fresh PKCE pair. */
export const newPkce = async (): Promise<{ verifier: string; challenge: string }> => {
  const verifier = oauth.generateRandomCodeVerifier();
  return { verifier, challenge: await oauth.calculatePKCECodeChallenge(verifier) };
};

/** Where to send the browser: the provider's consent page with PKCE (S256) and our `state`. */
export const authorizeUrl = (p: AccountProvider, f: { redirectUri: string; state: string; challenge: string }): string => {
  const url = new URL(p.authorize_url);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", p.client_id);
  url.searchParams.set("redirect_uri", f.redirectUri);
  if (p.scopes.length > 0) url.searchParams.set("scope", p.scopes.join(" "));
  url.searchParams.set("state", f.state);
  url.searchParams.set("code_challenge", f.challenge);
  url.searchParams.set("code_challenge_method", "S256");
  return url.href;
};

export interface GrantedTokens {
  tokens: AccountTokens;
  expiresIn: number | undefined;
}

const providerRefusal = (p: AccountProvider, what: string, err: unknown): FlowError => {
  const why =
    err instanceof oauth.ResponseBodyError
      ? `${err.error}${err.error_description ? `: ${err.error_description.slice(0, 200)}` : ""}`
      : err instanceof oauth.AuthorizationResponseError
        ? `${err.error}${err.error_description ? `: ${err.error_description.slice(0, 200)}` : ""}`
        : err instanceof Error
          ? err.message.slice(0, 200)
          : "unknown error";
  return new FlowError("conflict", `provider ${p.name}: ${what} failed (${why}); nothing was stored: start connecting again`, {
    cause: err,
  });
};

/** Exchanges the callback's code (checked against `state`) for tokens, sending the PKCE verifier. */
export const exchangeCode = async (
  p: AccountProvider,
  f: { redirectUri: string; callbackParams: URLSearchParams; state: string; verifier: string },
): Promise<GrantedTokens> => {
  const as = serverOf(p);
  try {
    const params = oauth.validateAuthResponse(as, clientOf(p), f.callbackParams, f.state);
    const res = await oauth.authorizationCodeGrantRequest(
      as,
      clientOf(p),
      oauth.ClientSecretPost(p.client_secret),
      params,
      f.redirectUri,
      f.verifier,
      optionsFor(p.token_url),
    );
    const t = await oauth.processAuthorizationCodeResponse(as, clientOf(p), res);
    return {
      tokens: { access_token: t.access_token, ...(t.refresh_token ? { refresh_token: t.refresh_token } : {}) },
      expiresIn: t.expires_in,
    };
  } catch (err) {
    throw providerRefusal(p, "the authorization", err);
  }
};

/** The account's far-side id and label, read through the provider's JSON pointers. Any failure refuses. */
export const readIdentity = async (p: AccountProvider, accessToken: string): Promise<{ farId: string; farLabel: string }> => {
  let doc: unknown;
  try {
    const res = await oauth.protectedResourceRequest(
      accessToken,
      "GET",
      new URL(p.identity.url),
      new Headers({ accept: "application/json" }),
      null,
      optionsFor(p.identity.url),
    );
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    doc = await res.json();
  } catch (err) {
    throw providerRefusal(p, "the identity lookup", err);
  }
  const id = readJsonPointer(doc, p.identity.id_pointer);
  if ((typeof id !== "string" || id === "") && (typeof id !== "number" || !Number.isFinite(id)))
    throw new FlowError("conflict", `provider ${p.name}: the identity response has no id at ${p.identity.id_pointer}; nothing was stored`);
  const label = readJsonPointer(doc, p.identity.label_pointer);
  const farLabel = typeof label === "string" || typeof label === "number" ? String(label).slice(0, 200) : String(id);
  return { farId: String(id), farLabel };
};

/** One refresh: what it came to, for core's decideAfterRefresh. Never throws. */
export const refreshGrant = async (p: AccountProvider, refreshToken: string, timeoutMs?: number): Promise<RefreshOutcome> => {
  const as = serverOf(p);
  try {
    const res = await oauth.refreshTokenGrantRequest(
      as,
      clientOf(p),
      oauth.ClientSecretPost(p.client_secret),
      refreshToken,
      optionsFor(p.token_url, timeoutMs),
    );
    const t = await oauth.processRefreshTokenResponse(as, clientOf(p), res);
    return {
      kind: "renewed",
      tokens: { access_token: t.access_token, ...(t.refresh_token ? { refresh_token: t.refresh_token } : {}) },
      ...(t.expires_in !== undefined ? { expiresIn: t.expires_in } : {}),
    };
  } catch (err) {
    if (err instanceof NoAnswerError) return { kind: err.sent ? "unknown" : "not_sent", detail: err.message };
    if (err instanceof oauth.ResponseBodyError && err.error === "invalid_grant")
      return { kind: "invalid_grant", detail: `invalid_grant${err.error_description ? `: ${err.error_description.slice(0, 200)}` : ""}` };
    if (err instanceof oauth.ResponseBodyError) return { kind: "provider_error", detail: `HTTP ${err.status} ${err.error}` };
    return { kind: "provider_error", detail: err instanceof Error ? err.message.slice(0, 200) : "unknown error" };
  }
};

/** Revokes a token at the provider (RFC 7009); false when it has no revoke_url or the revocation failed. */
export const revokeToken = async (p: AccountProvider, token: string): Promise<boolean> => {
  if (!p.revoke_url) return false;
  try {
    const res = await oauth.revocationRequest(
      serverOf(p),
      clientOf(p),
      oauth.ClientSecretPost(p.client_secret),
      token,
      optionsFor(p.revoke_url),
    );
    await oauth.processRevocationResponse(res);
    return true;
  } catch {
    return false;
  }
};
