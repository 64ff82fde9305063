// The ResourceStore port (ARCHITECTURE.md "Two deployment modes, one code path"): the writes of the
// declarative resources (handlers, event hooks, secrets, credentials, stored graphs). Types only. Writers (ingest's routes) parse
// with core's resources/ functions, then call the port; reads stay direct Postgres queries (the
// runtime reads only Postgres). Adapters: store/src/resource-store.ts (Postgres, local mode) and the
// Kubernetes one in controller/src/kube/ (writes the custom resource; the controller reconciles it).
import type { HandlerInput, HandlerRecord } from "./handler.js";
import type { HookRecord, HookSpec } from "./hook.js";
import type { SecretMeta } from "./secret.js";
import type { CredentialMeta } from "./credential.js";
import type { CredentialValue } from "../credentials/kinds.js";
import type { GraphDocument } from "../graph/model.js";

/** Where a resource lives: the project (a namespace in kubernetes mode) and its org, by name and id. */
export interface ResourceScope {
  readonly org: string;
  readonly project: string;
  readonly orgId: string;
  readonly projectId: string;
}

/**
 * A hook's shared secret on a write: `mint` keeps an existing hook's secret (senders keep working)
 * and mints one only for a new hook, shown once; `given` sets this value (a FlowEventHook's
 * secretRef), on create and on replace.
 */
export type HookSecretSource = { readonly kind: "mint" } | { readonly kind: "given"; readonly value: string };

/**
 * A hook's signing key on a write (manifest and manual-HMAC hooks): `given` in the clear (the
 * adapter seals it), `none` for a token hook (any old key is dropped), `keep` to keep the key an
 * existing hook has (a FlowEventHook whose key was set through the API has no signingKeyRef; a new
 * hook gets none).
 */
export type SigningKeySource = { readonly kind: "none" } | { readonly kind: "given"; readonly value: string } | { readonly kind: "keep" };

export interface PutHookInput {
  readonly name: string;
  readonly spec: HookSpec;
  readonly signingKey: SigningKeySource;
  readonly secret: HookSecretSource;
}

export interface PutHookResult {
  hook: HookRecord;
  created: boolean;
  /** The new shared secret, only when one was minted (a created hook with `mint`): shown once, never stored. */
  minted?: string;
}

/** A stored graph to write: checked by the caller (parseGraph with the manifests, then the save rules). */
export interface PutGraphInput {
  readonly name: string;
  readonly document: GraphDocument;
  /** The document as it was sent (its JSON text is what `GET .../graphs/<name>` answers; a FlowGraph's spec). */
  readonly sent: unknown;
  /** The saving user's id (null: a reconciler). */
  readonly userId: string | null;
}

/** A graph endpoint (a trigger or webhook node's) as a save answers it; `secret` only when this save minted it. */
export interface GraphEndpointWrite {
  node_id: string;
  kind: "trigger" | "webhook";
  event_type: string;
  created_at: string;
  secret?: string;
}

export interface PutGraphResult {
  created: boolean;
  createdBy: string | null;
  updatedAt: string;
  endpoints: GraphEndpointWrite[];
}

export interface ResourceStore {
  /** Creates or replaces a handler; `created` tells which. */
  putHandler(scope: ResourceScope, handler: HandlerInput): Promise<{ handler: HandlerRecord; created: boolean }>;
  /** False when there was no such handler. */
  deleteHandler(scope: ResourceScope, name: string): Promise<boolean>;

  putHook(scope: ResourceScope, input: PutHookInput): Promise<PutHookResult>;
  /**
   * Replaces a hook's shared secret (minted unless `given`); the old one stops working. Undefined
   * when there is no such hook; `minted` is set when the adapter minted the new secret.
   */
  rotateHookSecret(
    scope: ResourceScope,
    name: string,
    secret?: HookSecretSource,
  ): Promise<{ hook: HookRecord; minted?: string } | undefined>;
  /** False when there was no such hook. */
  deleteHook(scope: ResourceScope, name: string): Promise<boolean>;

  /** Sets a secret's value (validated by the caller: parseSecretValue); the adapter seals it. */
  putSecret(scope: ResourceScope, name: string, value: string): Promise<SecretMeta>;
  /** False when there was no such secret. */
  deleteSecret(scope: ResourceScope, name: string): Promise<boolean>;

  /**
   * Sets a credential (validated by the caller: parseCredentialValue); the adapter seals it. A name
   * a connected account holds is refused (`conflict`: they share one name space).
   */
  putCredential(scope: ResourceScope, name: string, value: CredentialValue): Promise<CredentialMeta>;
  /** False when there was no such credential. */
  deleteCredential(scope: ResourceScope, name: string): Promise<boolean>;

  /** Creates or replaces a stored graph and its endpoints (a FlowGraph in kubernetes mode too). */
  putGraph(scope: ResourceScope, graph: PutGraphInput): Promise<PutGraphResult>;
  /** False when there was no such graph. */
  deleteGraph(scope: ResourceScope, name: string): Promise<boolean>;
}
