// The Kubernetes ResourceStore (issue 16 item 3): in kubernetes mode the API's and the CLI's
// writes of handlers, hooks, secrets, credentials and stored graphs also write the custom resource, so that `kubectl get` and
// GitOps see what `flow handler set` did, and the controller keeps reconciling it.
//
// Order: Postgres first (through the Postgres adapter: the API's answer, a minted hook secret
// included, is exactly local mode's, and immediate), then the CR (created, or its spec merge-patched
// with the annotation `flowsvc.io/written-at`). When the controller reconciles that CR, Postgres
// already says the same, so the pass writes nothing but the status; the other order (CR first)
// would let the controller see a FlowSecret or a keyed hook before its value or key is sealed, and
// mark it not Ready until some later event. The written-at annotation is what gives the controller
// that event for a secret or hook whose spec did not change (a new value), so its status moves.
// When the CR write fails, a resource this write created in Postgres is removed again and the
// error is answered; a replace stays in Postgres until the controller's next resync of the CR
// brings Postgres back to it (docs/internals.md "Reconcilers").
//
// A resource whose CR takes its value from a Kubernetes Secret (valueFrom.secretKeyRef,
// secretRef, signingKeyRef; a FlowCredential's valueFrom) is refused a value through the API: it would be overwritten at the
// next reconcile; the answer says where to change it.
import type { KubeConfig } from "@kubernetes/client-node";
import {
  FlowError,
  credentialResourceSpecOf,
  handlerResourceSpecOf,
  type CredentialValue,
  type HandlerInput,
  type PutGraphInput,
  type PutHookInput,
  type ResourceScope,
  type ResourceStore,
  type HookSecretSource,
} from "@flowsvc/core";
import { FlowApi, apiStatus } from "./reconcile-api.js";
import { FLOWSVC_API_VERSION, FLOW_KINDS, type FlowKindName, type FlowObject } from "./reconcile-kinds.js";
import { objectNameFor, secretObjectFor } from "./reconcile-names.js";

export const WRITTEN_AT_ANNOTATION = "flowsvc.io/written-at";

type Spec = Record<string, unknown>;
type Cr = FlowObject<Spec, Record<string, unknown>>;

const unavailable = (err: unknown, what: string): FlowError =>
  apiStatus(err) === 404
    ? new FlowError("not_found", `${what}: the namespace does not exist or the flowsvc CRDs are not installed`, { cause: err })
    : new FlowError("unavailable", `${what}: the Kubernetes API refused or failed (${apiStatus(err) ?? "no answer"})`, { cause: err });

/** A reference from a CR to a Kubernetes Secret, as a sentence. */
const refText = (namespace: string, ref: unknown): string => {
  const r = ref as { name?: string; key?: string };
  return `Secret ${namespace}/${r.name ?? "?"} key ${r.key ?? "?"}`;
};

/** A FlowEventHook's spec for what the API set: the fields, and the refs the CR already had (a GitOps-managed hook whose configuration the API changed). */
const hookCrSpec = (input: PutHookInput, refs: Spec): Spec => {
  const s = input.spec;
  const fields: Spec = { event_type: s.mode === "manifest" ? null : s.eventType, manifest: s.manifest, hmac_header: s.hmacHeader };
  if (s.mode === "hmac") fields["hmac_prefix"] = s.hmacPrefix;
  if (refs["secretRef"]) fields["secretRef"] = refs["secretRef"];
  if (refs["signingKeyRef"] && input.signingKey.kind !== "none") fields["signingKeyRef"] = refs["signingKeyRef"];
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== null && v !== undefined));
};

export class KubeResourceStore implements ResourceStore {
  readonly #api: FlowApi;

  constructor(
    kc: KubeConfig,
    private readonly pg: ResourceStore,
  ) {
    this.#api = new FlowApi(kc);
  }

  async putHandler(scope: ResourceScope, h: HandlerInput) {
    const res = await this.pg.putHandler(scope, h);
    const { when, ...rest } = handlerResourceSpecOf(h);
    const spec: Spec = { ...rest, ...(when !== null && when !== undefined ? { when } : {}) };
    await this.#write("handler", scope, h.name, { spec, created: res.created, undo: () => this.pg.deleteHandler(scope, h.name) });
    return res;
  }

  deleteHandler(scope: ResourceScope, name: string) {
    return this.#delete("handler", scope, name, () => this.pg.deleteHandler(scope, name));
  }

  async putHook(scope: ResourceScope, input: PutHookInput) {
    const existing = await this.#read("hook", scope, input.name);
    const refs = existing?.spec ?? {};
    if (input.signingKey.kind === "given" && refs["signingKeyRef"])
      throw this.#fromSecret(scope, `event hook ${input.name}'s signing key`, refs["signingKeyRef"]);
    const secret: HookSecretSource = input.secret;
    if (secret.kind === "given" && refs["secretRef"]) throw this.#fromSecret(scope, `event hook ${input.name}'s secret`, refs["secretRef"]);
    const res = await this.pg.putHook(scope, input);
    const spec = hookCrSpec(input, refs);
    await this.#write("hook", scope, input.name, {
      spec,
      created: res.created,
      undo: () => this.pg.deleteHook(scope, input.name),
      existing,
    });
    return res;
  }

  async rotateHookSecret(scope: ResourceScope, name: string, secret?: HookSecretSource) {
    const existing = await this.#read("hook", scope, name);
    if (existing?.spec?.["secretRef"]) throw this.#fromSecret(scope, `event hook ${name}'s secret`, existing.spec["secretRef"]);
    const res = await this.pg.rotateHookSecret(scope, name, secret);
    if (res && existing) await this.#touch("hook", scope, existing);
    return res;
  }

  deleteHook(scope: ResourceScope, name: string) {
    return this.#delete("hook", scope, name, () => this.pg.deleteHook(scope, name));
  }

  async putSecret(scope: ResourceScope, name: string, value: string) {
    const existing = await this.#read("secret", scope, name);
    const ref = (existing?.spec?.["valueFrom"] as { secretKeyRef?: unknown } | undefined)?.secretKeyRef;
    if (ref) throw this.#fromSecret(scope, `secret ${name}`, ref);
    const meta = await this.pg.putSecret(scope, name, value);
    const { secretName } = secretObjectFor(name);
    await this.#write("secret", scope, name, {
      spec: secretName === undefined ? {} : { secretName },
      created: existing === undefined,
      undo: () => this.pg.deleteSecret(scope, name),
      existing,
    });
    return meta;
  }

  deleteSecret(scope: ResourceScope, name: string) {
    return this.#delete("secret", scope, name, () => this.pg.deleteSecret(scope, name));
  }

  async putCredential(scope: ResourceScope, name: string, value: CredentialValue) {
    const existing = await this.#read("credential", scope, name);
    const ref = (existing?.spec?.["valueFrom"] as { secretKeyRef?: unknown } | undefined)?.secretKeyRef;
    if (ref) throw this.#fromSecret(scope, `credential ${name}`, ref);
    const meta = await this.pg.putCredential(scope, name, value);
    // The CR says the kind only: a credential's fields (header, username) are as write-only as its value.
    await this.#write("credential", scope, name, {
      spec: credentialResourceSpecOf(value.kind),
      created: existing === undefined,
      undo: () => this.pg.deleteCredential(scope, name),
      existing,
    });
    return meta;
  }

  deleteCredential(scope: ResourceScope, name: string) {
    return this.#delete("credential", scope, name, () => this.pg.deleteCredential(scope, name));
  }

  async putGraph(scope: ResourceScope, g: PutGraphInput) {
    const existing = await this.#read("graph", scope, g.name);
    const res = await this.pg.putGraph(scope, g);
    // The FlowGraph's spec is the document as sent; its reconcile finds Postgres already the same and writes only the status.
    await this.#write("graph", scope, g.name, {
      spec: g.sent as Spec,
      created: res.created,
      undo: () => this.pg.deleteGraph(scope, g.name),
      existing,
    });
    return res;
  }

  deleteGraph(scope: ResourceScope, name: string) {
    return this.#delete("graph", scope, name, () => this.pg.deleteGraph(scope, name));
  }

  #fromSecret(scope: ResourceScope, what: string, ref: unknown): FlowError {
    return new FlowError("conflict", `${what} comes from ${refText(scope.project, ref)} (its custom resource says so)`, {
      hint: "change the Kubernetes Secret, or remove the reference from the custom resource",
    });
  }

  async #read(kind: FlowKindName, scope: ResourceScope, name: string): Promise<Cr | undefined> {
    try {
      return await this.#api.get<Cr>(kind, scope.project, objectNameFor(kind, name).name);
    } catch (err) {
      throw unavailable(err, `reading ${FLOW_KINDS[kind].kind} ${scope.project}/${name}`);
    }
  }

  /** Creates the CR, or merge-patches its spec; on failure undoes a create in Postgres and answers the error. */
  async #write(
    kind: FlowKindName,
    scope: ResourceScope,
    name: string,
    w: { spec: Spec; created: boolean; undo: () => Promise<boolean>; existing?: Cr | undefined },
  ): Promise<void> {
    const target = objectNameFor(kind, name);
    const annotations = { ...(target.annotations ?? {}), [WRITTEN_AT_ANNOTATION]: new Date().toISOString() };
    try {
      try {
        await this.#api.create<Cr>(kind, scope.project, {
          apiVersion: FLOWSVC_API_VERSION,
          kind: FLOW_KINDS[kind].kind,
          metadata: { name: target.name, namespace: scope.project, annotations },
          spec: w.spec,
        });
      } catch (err) {
        if (apiStatus(err) !== 409) throw err;
        // The whole spec is ours: null out fields the old spec had and this one has not.
        const old = w.existing ?? (await this.#api.get<Cr>(kind, scope.project, target.name));
        const cleared = Object.fromEntries(Object.keys(old?.spec ?? {}).map((k) => [k, null]));
        await this.#api.patch(kind, scope.project, target.name, { metadata: { annotations }, spec: { ...cleared, ...w.spec } });
      }
    } catch (err) {
      if (w.created) await w.undo().catch(() => undefined);
      throw unavailable(err, `writing ${FLOW_KINDS[kind].kind} ${scope.project}/${target.name}`);
    }
  }

  /** A metadata-only change, so the controller reconciles a CR whose spec stayed (a new value, a rotated secret). */
  async #touch(kind: FlowKindName, scope: ResourceScope, existing: Cr): Promise<void> {
    try {
      await this.#api.patch(kind, scope.project, existing.metadata!.name!, {
        metadata: { annotations: { [WRITTEN_AT_ANNOTATION]: new Date().toISOString() } },
      });
    } catch (err) {
      throw unavailable(err, `writing ${FLOW_KINDS[kind].kind} ${scope.project}/${existing.metadata!.name}`);
    }
  }

  /** Deletes the CR (the controller would remove the resource too) and the resource, at once. */
  async #delete(kind: FlowKindName, scope: ResourceScope, name: string, pgDelete: () => Promise<boolean>): Promise<boolean> {
    let crDeleted: boolean;
    try {
      crDeleted = await this.#api.delete(kind, scope.project, objectNameFor(kind, name).name);
    } catch (err) {
      throw unavailable(err, `deleting ${FLOW_KINDS[kind].kind} ${scope.project}/${name}`);
    }
    return (await pgDelete()) || crDeleted;
  }
}
