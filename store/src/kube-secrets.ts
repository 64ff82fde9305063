// What the reconcilers compare before they write (controller/src/kube/reconcile-*.ts), so that a
// resync of an unchanged Kubernetes Secret neither re-seals a value nor moves its set_at (which
// would make every run masker of the project reload).
import type { Pool } from "pg";
import type { Keyring } from "./keyring.js";
import { hookSealName } from "./hooks.js";

type Scope = { readonly orgId: string; readonly projectId: string };

/** A secret's value, opened; undefined when it is not set or does not open. */
export const openSecretValue = async (pool: Pool, keyring: Keyring, scope: Scope, name: string): Promise<string | undefined> => {
  const { rows } = await pool.query<{ sealed: Buffer }>(`select sealed from secrets where project_id = $1 and name = $2`, [
    scope.projectId,
    name,
  ]);
  if (!rows[0]) return undefined;
  return keyring
    .open(scope.orgId, { org: scope.orgId, project: scope.projectId, kind: "secret", name }, rows[0].sealed)
    .catch(() => undefined);
};

/** A hook's stored material: its shared secret's digest and its signing key, opened (null without one). */
export const hookMaterial = async (
  pool: Pool,
  keyring: Keyring,
  scope: Scope,
  name: string,
): Promise<{ secretDigest: Buffer; signingKey: string | null | undefined } | undefined> => {
  const { rows } = await pool.query<{ secret_digest: Buffer; key_sealed: Buffer | null }>(
    `select secret_digest, key_sealed from event_hooks where project_id = $1 and name = $2`,
    [scope.projectId, name],
  );
  const r = rows[0];
  if (!r) return undefined;
  if (!r.key_sealed) return { secretDigest: r.secret_digest, signingKey: null };
  const ctx = { org: scope.orgId, project: scope.projectId, kind: "credential" as const, name: hookSealName(name) };
  return { secretDigest: r.secret_digest, signingKey: await keyring.open(scope.orgId, ctx, r.key_sealed).catch(() => undefined) };
};
