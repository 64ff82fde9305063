// The Postgres adapter of core's ResourceStore port (core/src/resources/resource-store.ts): the
// writes of handlers, event hooks, secrets and credentials in local mode, and the last step of every write in
// kubernetes mode (the controller reconciles a custom resource into Postgres through it). Values are
// sealed here with the org key; a hook's shared secret is kept only as a digest.
import type { Pool } from "pg";
import type {
  HandlerInput,
  HookSecretSource,
  PutHookInput,
  PutHookResult,
  ResourceScope,
  ResourceStore,
  SecretMeta,
  SigningKeySource,
} from "@flowsvc/core";
import { deleteHandler, upsertHandler } from "./handlers.js";
import { deleteHook, hookSealName, mintHookSecret, rotateHookSecret, upsertHook, type HookMaterial } from "./hooks.js";
import type { Keyring } from "./keyring.js";
import { digestToken } from "./mint.js";
import { deleteSecret, upsertSecret } from "./secrets.js";
import { deleteCredential, setCredential } from "./credentials.js";
import { deleteStoredGraph, graphEndpointsOf, putStoredGraph } from "./graphs.js";

/** The digest to store for a shared secret, and the secret itself when it was minted (shown once). */
const secretOf = (source: HookSecretSource): { digest: Uint8Array; minted?: string } => {
  if (source.kind === "given") return { digest: digestToken(source.value) };
  const minted = mintHookSecret();
  return { digest: minted.digest, minted: minted.secret };
};

const sealKey = async (keyring: Keyring, scope: ResourceScope, name: string, key: SigningKeySource): Promise<HookMaterial["keySealed"]> => {
  if (key.kind === "none") return null;
  if (key.kind === "keep") return "keep";
  return keyring.seal(scope.orgId, { org: scope.orgId, project: scope.projectId, kind: "credential", name: hookSealName(name) }, key.value);
};

const putHook = async (pool: Pool, keyring: Keyring, scope: ResourceScope, input: PutHookInput): Promise<PutHookResult> => {
  const keySealed = await sealKey(keyring, scope, input.name, input.signingKey);
  const secret = secretOf(input.secret);
  const { hook, created } = await upsertHook(pool, { projectId: scope.projectId, name: input.name }, input.spec, {
    keySealed,
    secretDigest: secret.digest,
    replaceSecret: input.secret.kind === "given",
  });
  // A minted secret is new only for a created hook; a replaced one kept its secret.
  return created && secret.minted !== undefined ? { hook, created, minted: secret.minted } : { hook, created };
};

/** The ResourceStore over Postgres: what `flow server` and ingest's tests write through. */
export const createPgResourceStore = (pool: Pool, keyring: Keyring): ResourceStore => ({
  putHandler: (scope, handler: HandlerInput) => upsertHandler(pool, scope.projectId, handler),
  deleteHandler: (scope, name) => deleteHandler(pool, scope.projectId, name),
  putHook: (scope, input) => putHook(pool, keyring, scope, input),
  rotateHookSecret: async (scope, name, source = { kind: "mint" }) => {
    const secret = secretOf(source);
    const hook = await rotateHookSecret(pool, scope.projectId, name, secret.digest);
    if (!hook) return undefined;
    return secret.minted === undefined ? { hook } : { hook, minted: secret.minted };
  },
  deleteHook: (scope, name) => deleteHook(pool, scope.projectId, name),
  putSecret: async (scope, name, value): Promise<SecretMeta> => {
    const sealed = await keyring.seal(scope.orgId, { org: scope.orgId, project: scope.projectId, kind: "secret", name }, value);
    return upsertSecret(pool, scope.projectId, name, sealed);
  },
  deleteSecret: (scope, name) => deleteSecret(pool, scope.projectId, name),
  putCredential: (scope, name, value) => setCredential(pool, keyring, { scope, name, value }),
  deleteCredential: (scope, name) => deleteCredential(pool, scope.projectId, name),
  putGraph: async (scope, g) => {
    const saved = await putStoredGraph(pool, {
      projectId: scope.projectId,
      name: g.name,
      document: g.document,
      source: `${JSON.stringify(g.sent, null, 2)}\n`,
      userId: g.userId,
      endpoints: graphEndpointsOf(g.document, g.name),
    });
    return { created: saved.created, createdBy: saved.graph.createdBy, updatedAt: saved.graph.updatedAt, endpoints: saved.endpoints };
  },
  deleteGraph: (scope, name) => deleteStoredGraph(pool, scope.projectId, name),
});
