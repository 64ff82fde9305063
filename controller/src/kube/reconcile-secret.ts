// FlowSecret -> Postgres. With valueFrom.secretKeyRef the value is read from the Kubernetes Secret
// and sealed into Postgres (the store's sealing, through the Postgres ResourceStore), again only
// when it changed; without it the value is set through the API or CLI and the status shows only
// setAt. No value is ever written to the CR. When the Secret or its key is gone (the API server
// says so), the secret is deleted from the project in the same pass (fail closed: jobs no longer get
// it); when it is back, the next pass seals it again.
import type { Pool } from "pg";
import { SecretResourceSpec, assertSecretName, assertSecretValue, type ResourceStore } from "@flowsvc/core";
import { getSecretMeta, listSecrets, openSecretValue, type Keyring } from "@flowsvc/store";
import type { ConfigKind } from "./reconcile-config.js";
import type { FlowObject } from "./reconcile-kinds.js";
import { missOutcome, type SecretRefs } from "./reconcile-secret-refs.js";

export type FlowSecretObject = FlowObject<SecretResourceSpec, Record<string, unknown>>;

export const secretKind = (deps: {
  pool: Pool;
  keyring: Keyring;
  store: ResourceStore;
  refs: SecretRefs;
}): ConfigKind<FlowSecretObject> => ({
  kind: "secret",
  apply: async (obj, scope, name) => {
    assertSecretName(name);
    const spec = SecretResourceSpec.parse(obj.spec ?? {});
    const ref = spec.valueFrom?.secretKeyRef;
    if (ref) {
      const found = await deps.refs.lookup(scope.project, ref);
      if (!found.found) return missOutcome(found, { withdraw: () => deps.store.deleteSecret(scope, name), cleared: { setAt: null } });
      assertSecretValue(name, found.value);
      if ((await openSecretValue(deps.pool, deps.keyring, scope, name)) !== found.value)
        await deps.store.putSecret(scope, name, found.value);
    }
    const meta = await getSecretMeta(deps.pool, scope.projectId, name);
    if (!meta) return { ready: false, reason: "ValueNotSet", message: `no value yet: set one with \`flow secret set ${name} -\`` };
    return { ready: true, fields: { setAt: meta.set_at } };
  },
  remove: (scope, name) => deps.store.deleteSecret(scope, name),
  stored: async (projectId) => (await listSecrets(deps.pool, projectId)).map((s) => ({ name: s.name, writtenAt: new Date(s.set_at) })),
});
