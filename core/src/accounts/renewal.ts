/**
 * The renewal state machine of a connected account (spec, "Connected account status"; SECURITY.md
 * "Connected accounts"): when to refresh, and what one refresh attempt's outcome makes of the
 * account. Pure: time and randomness come in as parameters. The controller's renewal loop performs
 * the attempt (controller/src/accounts/) and the store writes the decision under the account's
 * version (store/src/accounts.ts).
 */
import type { AccountStatus } from "../credentials/resolve.js";

/** Refresh this long before expiry at most (a fifth of the lifetime for short-lived tokens). */
export const REFRESH_MARGIN_SECS = 300;
/** First retry after a failure that cost nothing, doubling to the cap. */
export const RETRY_BASE_SECS = 5;
export const RETRY_CAP_SECS = 600;

/**
 * When a token that lives `lifetimeSecs` from `nowMs` should be renewed, or undefined when it never
 * is (the provider gave no lifetime and the operator set no `assumed_lifetime_secs`).
 */
export const refreshAfterMs = (nowMs: number, lifetimeSecs: number | undefined): number | undefined => {
  if (lifetimeSecs === undefined || !Number.isFinite(lifetimeSecs) || lifetimeSecs <= 0) return undefined;
  const margin = Math.min(REFRESH_MARGIN_SECS, lifetimeSecs / 5);
  return nowMs + (lifetimeSecs - margin) * 1000;
};

/** The lifetime a token response grants: its `expires_in`, else the provider's assumed lifetime, else none. */
export const tokenLifetimeSecs = (expiresIn: number | undefined, assumedLifetimeSecs: number | undefined): number | undefined =>
  expiresIn !== undefined && Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : assumedLifetimeSecs;

export interface AccountTokens {
  readonly access_token: string;
  readonly refresh_token?: string;
}

/** What one refresh attempt came to. */
export type RefreshOutcome =
  /** The provider answered with new tokens. */
  | { readonly kind: "renewed"; readonly tokens: AccountTokens; readonly expiresIn?: number }
  /** The provider refused the grant (`invalid_grant`): it is gone; only the person can reconnect. */
  | { readonly kind: "invalid_grant"; readonly detail: string }
  /** Nothing reached the provider (no connection, DNS): trying again costs nothing. */
  | { readonly kind: "not_sent"; readonly detail: string }
  /** The request was sent and no answer came (connection dropped, timed out): the provider may have rotated. */
  | { readonly kind: "unknown"; readonly detail: string }
  /** The provider answered with a 5xx or another error: back off and try again. */
  | { readonly kind: "provider_error"; readonly detail: string };

export interface RenewalDecision {
  readonly status: AccountStatus;
  /** New tokens to seal (renewed only). */
  readonly tokens?: AccountTokens;
  /** When to look again; null: never (needs a person). */
  readonly refreshAfterMs: number | null;
  readonly expiresAtMs?: number | null;
  readonly attempts: number;
  readonly lastError: string | null;
}

export interface RenewalContext {
  readonly nowMs: number;
  /** Failed attempts so far (0 on the first). */
  readonly attempts: number;
  readonly rotatesRefreshToken: boolean;
  readonly assumedLifetimeSecs: number | undefined;
  /** The refresh token the attempt sent: kept when a renewal answers no new one. */
  readonly refreshToken: string;
  /** A number in [0, 1) for jitter. */
  readonly random: number;
}

/** Seconds to wait after `attempts` failures: doubling from RETRY_BASE_SECS to RETRY_CAP_SECS, with up to 20% jitter. */
export const retryDelaySecs = (attempts: number, random: number): number => {
  const base = Math.min(RETRY_CAP_SECS, RETRY_BASE_SECS * 2 ** Math.min(attempts, 20));
  return base * (1 + 0.2 * random);
};

const backOff = (ctx: RenewalContext, detail: string): RenewalDecision => ({
  status: "refreshing",
  refreshAfterMs: ctx.nowMs + retryDelaySecs(ctx.attempts, ctx.random) * 1000,
  attempts: ctx.attempts + 1,
  lastError: detail,
});

/**
 * The account after one attempt. With a provider that rotates refresh tokens, an unknown outcome is
 * `in_doubt`: the provider may hold a new token we never saw, and presenting the old one again may
 * revoke the whole grant (reuse detection), so it is never sent again; a person reconnects.
 */
export const decideAfterRefresh = (outcome: RefreshOutcome, ctx: RenewalContext): RenewalDecision => {
  switch (outcome.kind) {
    case "renewed": {
      const lifetime = tokenLifetimeSecs(outcome.expiresIn, ctx.assumedLifetimeSecs);
      const tokens: AccountTokens = {
        access_token: outcome.tokens.access_token,
        refresh_token: outcome.tokens.refresh_token ?? ctx.refreshToken,
      };
      return {
        status: "active",
        tokens,
        refreshAfterMs: refreshAfterMs(ctx.nowMs, lifetime) ?? null,
        expiresAtMs: lifetime === undefined ? null : ctx.nowMs + lifetime * 1000,
        attempts: 0,
        lastError: null,
      };
    }
    case "invalid_grant":
      return { status: "needs_reauth", refreshAfterMs: null, attempts: ctx.attempts + 1, lastError: outcome.detail };
    case "unknown":
      return ctx.rotatesRefreshToken
        ? { status: "in_doubt", refreshAfterMs: null, attempts: ctx.attempts + 1, lastError: outcome.detail }
        : backOff(ctx, outcome.detail);
    case "not_sent":
    case "provider_error":
      return backOff(ctx, outcome.detail);
  }
};
