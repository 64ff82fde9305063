// The Kubernetes Secrets that FlowSecrets and FlowCredentials (valueFrom.secretKeyRef, usernameFrom) and
// FlowEventHooks (secretRef, signingKeyRef) point at, read from a Secret informer. When a Secret changes, the CRs that point
// at it are reconciled again (the value is re-sealed into Postgres: a rotation reaches the next run).
// A Secret or key that is gone fails closed: the value is withdrawn from Postgres (missOutcome), but
// only once the API server itself said so (a GET answering 404, or a Secret without the key); a
// stale cache or a failed read (5xx, 403, a timeout) never withdraws a value.
// Values live only in this process's cache and, sealed, in Postgres; never in a CR or a log.
import type { V1Secret } from "@kubernetes/client-node";
import type { SecretKeyRef } from "@flowsvc/core";
import type { WatchedObjects } from "./informers.js";
import { apiStatus } from "./reconcile-api.js";
import type { Outcome } from "./reconcile-config.js";

/**
 * What a ref points at: the value; or a miss the API server confirmed (`gone`: it answered 404 for
 * the Secret, or the Secret it answered has no such key), after which the value must stop working;
 * or a miss it did not confirm (5xx, 403, no answer): the last value stays and the pass is retried.
 */
export type SecretLookup =
  | { found: true; value: string }
  | { found: false; gone: true; reason: "SecretNotFound" | "KeyNotFound"; message: string }
  | { found: false; gone: false; reason: "SecretUnreadable"; message: string };
export type SecretMiss = Exclude<SecretLookup, { found: true }>;

/** The API server's view of one Secret: undefined only when it answered 404; throws on anything else. */
export type ReadSecret = (namespace: string, name: string) => Promise<V1Secret | undefined>;

const valueIn = (secret: V1Secret, key: string): string | undefined => {
  const data = secret.data?.[key];
  return data === undefined ? undefined : Buffer.from(data, "base64").toString("utf8");
};

/** Why a read failed, in a few words (the status, or the client's message), never a value. */
const whyUnread = (err: unknown): string => {
  const status = apiStatus(err);
  if (status !== undefined) return `the API server answered ${status}${status === 403 ? ": the controller may not get Secrets here" : ""}`;
  return err instanceof Error ? err.message.slice(0, 200) : "no answer";
};

export class SecretRefs {
  constructor(
    private readonly secrets: () => WatchedObjects<V1Secret>,
    private readonly read: ReadSecret,
  ) {}

  /**
   * The value behind `ref` in `namespace` (UTF-8 of the data key), or why there is none; waits for
   * the first list. The informer's cache answers a hit; a miss (the Secret or key absent from the
   * cache, which may be stale) is confirmed by a GET before it counts as gone.
   */
  async lookup(namespace: string, ref: SecretKeyRef): Promise<SecretLookup> {
    await this.secrets().synced;
    const cached = this.secrets().get(namespace, ref.name);
    const hit = cached && valueIn(cached, ref.key);
    if (hit !== undefined) return { found: true, value: hit };
    const where = `Secret ${namespace}/${ref.name}`;
    let secret: V1Secret | undefined;
    try {
      secret = await this.read(namespace, ref.name);
    } catch (err) {
      return { found: false, gone: false, reason: "SecretUnreadable", message: `${where} could not be read (${whyUnread(err)})` };
    }
    if (!secret) return { found: false, gone: true, reason: "SecretNotFound", message: `${where} not found (key ${ref.key})` };
    const value = valueIn(secret, ref.key);
    if (value === undefined) return { found: false, gone: true, reason: "KeyNotFound", message: `${where} has no key ${ref.key}` };
    return { found: true, value };
  }
}

/**
 * The Outcome of a ref that gave no value (`prefix` says which ref of the CR). A confirmed miss
 * fails closed: `withdraw` takes the value out of Postgres first (a run or a delivery no longer gets
 * it), and `cleared` are the status fields that described it. An unconfirmed one keeps the value,
 * says so, and is retried (Ready Unknown).
 */
export const missOutcome = async (
  miss: SecretMiss,
  w: { prefix?: string; withdraw: () => Promise<unknown>; cleared: Record<string, null>; withdrawn?: string },
): Promise<Outcome> => {
  const message = `${w.prefix ?? ""}${miss.message}`;
  if (!miss.gone) return { ready: false, transient: true, reason: miss.reason, message: `${message}: a value already set stays in effect` };
  await w.withdraw();
  return {
    ready: false,
    reason: miss.reason,
    message: `${message}: ${w.withdrawn ?? "the value is withdrawn"} until it is back`,
    fields: w.cleared,
  };
};

/** The refs a CR's spec holds (valueFrom.secretKeyRef, usernameFrom.secretKeyRef, secretRef, signingKeyRef), by Secret name. */
export const referencedSecrets = (spec: unknown): string[] => {
  const s = (spec ?? {}) as {
    valueFrom?: { secretKeyRef?: { name?: unknown } };
    usernameFrom?: { secretKeyRef?: { name?: unknown } };
    secretRef?: { name?: unknown };
    signingKeyRef?: { name?: unknown };
  };
  return [s.valueFrom?.secretKeyRef?.name, s.usernameFrom?.secretKeyRef?.name, s.secretRef?.name, s.signingKeyRef?.name].filter(
    (n): n is string => typeof n === "string",
  );
};
