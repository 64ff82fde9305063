// FlowEventHook -> Postgres. The spec is checked by core's parseHookResource (the API's rules); the
// shared secret comes from `secretRef` (given, digested; a changed Secret rotates it) or is minted
// by flowsvc and kept (`flow event-hook rotate` shows a new one once, as in local mode); the signing
// key of a manifest or manual-HMAC hook from `signingKeyRef`, or the one set through the API is
// kept. The status shows the ingest URL and when the secret was set. When a referenced Secret or
// key is gone (the API server says so), the hook is deleted from the project in the same pass (fail
// closed: a delivery then gets ingest's 404 "no event hook", whatever it is signed with; a secret
// flowsvc minted or a key set through the API goes with it); when it is back, the next pass makes
// the hook again from the Secret.
import type { Pool } from "pg";
import {
  parseHookResource,
  type HookResourceSpec,
  type HookSecretSource,
  type HookSpec,
  type ResourceScope,
  type ResourceStore,
  type SigningKeySource,
} from "@flowsvc/core";
import { getHook, hookMaterial, hookSecretMatches, listHooks, type Keyring } from "@flowsvc/store";
import type { ConfigKind, Outcome } from "./reconcile-config.js";
import type { FlowObject } from "./reconcile-kinds.js";
import { missOutcome, type SecretRefs } from "./reconcile-secret-refs.js";

export type FlowHookObject = FlowObject<HookResourceSpec, Record<string, unknown>>;

export interface HookDeps {
  pool: Pool;
  keyring: Keyring;
  store: ResourceStore;
  refs: SecretRefs;
  publicUrl: string | undefined;
}

/** Where senders post (the same path the API answers as ingest_url). */
export const hookUrl = (publicUrl: string | undefined, scope: ResourceScope, name: string): string | undefined =>
  publicUrl === undefined
    ? undefined
    : `${publicUrl.replace(/\/+$/, "")}/api/v1/hooks/${[scope.org, scope.project, name].map(encodeURIComponent).join("/")}`;

type Material = { secret: HookSecretSource; signingKey: SigningKeySource };

/** The secret and key sources the spec names, or the Outcome saying which Secret is missing (the hook withdrawn when it is gone). */
const materialOf = async (
  deps: HookDeps,
  scope: ResourceScope,
  { name, setup }: { name: string; setup: ReturnType<typeof parseHookResource> },
): Promise<Material | Outcome> => {
  let secret: HookSecretSource = { kind: "mint" };
  let signingKey: SigningKeySource = setup.spec.mode === "token" ? { kind: "none" } : { kind: "keep" };
  const withdraw = {
    withdraw: () => deps.store.deleteHook(scope, name),
    cleared: { secretSetAt: null },
    withdrawn: `event hook ${name} is removed (deliveries get 404)`,
  };
  if (setup.secretRef) {
    const found = await deps.refs.lookup(scope.project, setup.secretRef);
    if (!found.found) return missOutcome(found, { prefix: "secretRef: ", ...withdraw });
    secret = { kind: "given", value: found.value };
  }
  if (setup.signingKeyRef) {
    const found = await deps.refs.lookup(scope.project, setup.signingKeyRef);
    if (!found.found) return missOutcome(found, { prefix: "signingKeyRef: ", ...withdraw });
    signingKey = { kind: "given", value: found.value };
  }
  return { secret, signingKey };
};

const sameSpec = (
  a: { mode: string; event_type: string | null; manifest: string | null; hmac_header: string | null; hmac_prefix: string | null },
  b: HookSpec,
): boolean =>
  a.mode === b.mode &&
  a.event_type === b.eventType &&
  a.manifest === b.manifest &&
  a.hmac_header === b.hmacHeader &&
  a.hmac_prefix === b.hmacPrefix;

/** Whether Postgres already holds this spec and material (a resync writes nothing). */
const unchanged = async (deps: HookDeps, scope: ResourceScope, name: string, want: { spec: HookSpec } & Material): Promise<boolean> => {
  const current = await getHook(deps.pool, scope.projectId, name);
  if (!current || !sameSpec(current, want.spec)) return false;
  const stored = await hookMaterial(deps.pool, deps.keyring, scope, name);
  if (!stored) return false;
  if (want.secret.kind === "given" && !hookSecretMatches(want.secret.value, stored.secretDigest)) return false;
  if (want.signingKey.kind === "given" && stored.signingKey !== want.signingKey.value) return false;
  return !(want.signingKey.kind === "none" && stored.signingKey !== null);
};

export const hookKind = (deps: HookDeps): ConfigKind<FlowHookObject> => ({
  kind: "hook",
  apply: async (obj, scope, name) => {
    const existing = await hookMaterial(deps.pool, deps.keyring, scope, name);
    const setup = parseHookResource(name, obj.spec, typeof existing?.signingKey === "string");
    const material = await materialOf(deps, scope, { name, setup });
    if ("ready" in material) return material;
    if (!(await unchanged(deps, scope, name, { spec: setup.spec, ...material })))
      await deps.store.putHook(scope, { name, spec: setup.spec, ...material });
    const hook = await getHook(deps.pool, scope.projectId, name);
    const url = hookUrl(deps.publicUrl, scope, name);
    return { ready: true, fields: { ...(url ? { url } : {}), ...(hook ? { secretSetAt: hook.rotated_at ?? hook.created_at } : {}) } };
  },
  remove: (scope, name) => deps.store.deleteHook(scope, name),
  stored: async (projectId) => (await listHooks(deps.pool, projectId)).map((h) => ({ name: h.name, writtenAt: new Date(h.created_at) })),
});
