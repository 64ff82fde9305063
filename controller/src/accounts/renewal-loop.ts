/**
 * Renews connected accounts' tokens before they expire (spec, "Connected account" rule 4 and
 * "Connected account status"; SECURITY.md "Connected accounts"). Runs beside the timer loop, on the
 * leader only in Kubernetes mode; it stays correct with several loops at once (two replicas, a
 * leader hand-over): each account is refreshed under a lease row, re-read after the lease is taken,
 * moved to `refreshing` by a version compare-and-set before anything is sent, and written back only
 * under the version it moved it to. The decision of each outcome is core's `decideAfterRefresh`.
 */
import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { decideAfterRefresh, type AccountProvider, type RenewalDecision } from "@flowsvc/core";
import {
  applyRenewal,
  dueAccounts,
  markRefreshing,
  readAccountForRefresh,
  releaseRefreshLease,
  takeRefreshLease,
  type AccountForRefresh,
  type AccountKey,
  type Keyring,
} from "@flowsvc/store";
import { refreshGrant } from "./oauth-client.js";

export interface RenewalDeps {
  pool: Pool;
  keyring: Keyring;
  providers: ReadonlyMap<string, AccountProvider>;
  /** This loop's lease identity (unique per process). */
  holder?: string;
  log: { error(obj: Record<string, unknown>, msg: string): void; info?(obj: Record<string, unknown>, msg: string): void };
  /** How long a lease lasts: longer than one refresh can take. */
  leaseMs?: number;
  /** Accounts looked at per pass, and refreshed at once. */
  batch?: number;
  concurrency?: number;
  /** A provider request's timeout (tests shorten it). */
  timeoutMs?: number;
  now?: () => number;
  random?: () => number;
}

export type RenewalResult = "renewed" | "skipped" | "lost" | RenewalDecision["status"];

const LEASE_MS = 60_000;

/** A decision with nothing sent: the account is due but has no refresh token, so it cannot be renewed. */
const noRefreshToken = (attempts: number): RenewalDecision => ({
  status: "needs_reauth",
  refreshAfterMs: null,
  attempts,
  lastError: "the provider gave no refresh token: reconnect before the token expires",
});

/**
 * A refresh whose sender died after sending (the process was killed mid-request): its outcome is
 * as unknown as a dropped connection's, so with a rotating provider the old token is not sent again.
 */
const sentUnrecorded = (attempts: number): RenewalDecision => ({
  status: "in_doubt",
  refreshAfterMs: null,
  attempts: attempts + 1,
  lastError: "an earlier renewal was sent and its outcome never recorded (its process ended): the provider may have rotated the token",
});

/** What one attempt at the provider makes of the account (nothing is sent without a refresh token). */
const attempt = async (deps: RenewalDeps, a: AccountForRefresh, provider: AccountProvider): Promise<RenewalDecision> => {
  const refreshToken = a.tokens?.refresh_token;
  if (refreshToken === undefined) return noRefreshToken(a.attempts);
  if (a.sentUnrecorded && provider.capabilities.rotates_refresh_token) return sentUnrecorded(a.attempts);
  return decideAfterRefresh(await refreshGrant(provider, refreshToken, deps.timeoutMs), {
    nowMs: (deps.now ?? Date.now)(),
    attempts: a.attempts,
    rotatesRefreshToken: provider.capabilities.rotates_refresh_token,
    assumedLifetimeSecs: provider.assumed_lifetime_secs,
    refreshToken,
    random: (deps.random ?? Math.random)(),
  });
};

const stillDue = (a: AccountForRefresh | undefined): a is AccountForRefresh =>
  a !== undefined && a.due && (a.status === "active" || a.status === "refreshing");

/** Under the lease: re-read, move to `refreshing` by CAS, attempt, write back under that version. */
const renewLeased = async (deps: RenewalDeps, key: AccountKey): Promise<RenewalResult> => {
  const a = await readAccountForRefresh(deps.pool, deps.keyring, key);
  const provider = a && deps.providers.get(a.provider);
  if (!stillDue(a) || !provider) return "skipped";
  const version = await markRefreshing(deps.pool, key, a.version);
  if (version === undefined) return "lost";
  const decision = await attempt(deps, a, provider);
  if (!(await applyRenewal(deps.pool, deps.keyring, { key, scope: a.scope, version, decision }))) return "lost";
  if (decision.status === "active") return "renewed";
  if (decision.status !== "refreshing")
    deps.log.info?.(
      { account: key.name, project: key.projectId, status: decision.status, why: decision.lastError },
      "connected account needs a person",
    );
  return decision.status;
};

/** Renews one account if it is still due and no other loop holds its lease; what came of it. */
export const renewAccount = async (deps: RenewalDeps, key: AccountKey, holder: string): Promise<RenewalResult> => {
  if (!(await takeRefreshLease(deps.pool, key, { holder, ttlMs: deps.leaseMs ?? LEASE_MS }))) return "skipped";
  try {
    return await renewLeased(deps, key);
  } finally {
    await releaseRefreshLease(deps.pool, key, holder);
  }
};

/** One pass: every due account (up to `batch`), `concurrency` at a time. */
export const renewDueAccounts = async (deps: RenewalDeps, holder: string): Promise<RenewalResult[]> => {
  const due = await dueAccounts(deps.pool, deps.batch ?? 200);
  const results: RenewalResult[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < due.length) {
      const key = due[next++]!;
      try {
        results.push(await renewAccount(deps, key, holder));
      } catch (err) {
        deps.log.error({ err, account: key.name, project: key.projectId }, "renewing a connected account failed; retrying on a later pass");
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(deps.concurrency ?? 8, due.length) }, worker));
  return results;
};

const TICK_MS = 5_000;

/** The background loop: a pass every `tickMs` (no pass while one runs). Nothing to do without providers. */
export class AccountRenewalLoop {
  readonly #deps: RenewalDeps;
  readonly #holder: string;
  readonly #tickMs: number;
  #timer: NodeJS.Timeout | undefined;
  #busy: Promise<unknown> | undefined;

  constructor(deps: RenewalDeps, tickMs = TICK_MS) {
    this.#deps = deps;
    this.#holder = deps.holder ?? `renewal-${randomUUID()}`;
    this.#tickMs = tickMs;
  }

  start(): void {
    if (this.#deps.providers.size === 0) return;
    this.#timer = setInterval(() => void this.tick(), this.#tickMs);
  }

  async tick(): Promise<RenewalResult[]> {
    if (this.#busy) return [];
    const pass = renewDueAccounts(this.#deps, this.#holder).catch((err: unknown) => {
      this.#deps.log.error({ err }, "account renewal pass failed; retrying on the next tick");
      return [];
    });
    this.#busy = pass;
    try {
      return await pass;
    } finally {
      this.#busy = undefined;
    }
  }

  /** Stops the timer and waits for a pass in flight (its leases are released). */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await this.#busy;
  }
}
