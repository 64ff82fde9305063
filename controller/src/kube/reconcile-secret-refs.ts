// The Kubernetes Secrets that FlowSecrets and FlowCredentials (valueFrom.secretKeyRef, usernameFrom) and
// FlowEventHooks (secretRef, signingKeyRef) point at, read from a Secret informer. When a Secret changes, the CRs that point
// at it are reconciled again (the value is re-sealed into Postgres: a rotation reaches the next run).
// Values live only in this process's cache and, sealed, in Postgres; never in a CR or a log.
import type { V1Secret } from "@kubernetes/client-node";
import type { SecretKeyRef } from "@flowsvc/core";
import type { WatchedObjects } from "./informers.js";

export type SecretLookup = { found: true; value: string } | { found: false; message: string };

export class SecretRefs {
  constructor(private readonly secrets: () => WatchedObjects<V1Secret>) {}

  /** The value behind `ref` in `namespace` (UTF-8 of the data key), or why there is none; waits for the first list. */
  async lookup(namespace: string, ref: SecretKeyRef): Promise<SecretLookup> {
    await this.secrets().synced;
    const secret = this.secrets().get(namespace, ref.name);
    if (!secret) return { found: false, message: `Secret ${namespace}/${ref.name} not found` };
    const data = secret.data?.[ref.key];
    if (data === undefined) return { found: false, message: `Secret ${namespace}/${ref.name} has no key ${ref.key}` };
    return { found: true, value: Buffer.from(data, "base64").toString("utf8") };
  }
}

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
