// FlowCredential -> Postgres. With valueFrom.secretKeyRef the token / key / password (and a basic
// credential's username, from usernameFrom or the spec) is read from the Kubernetes Secret, checked
// whole by core's parseCredentialValue and sealed into Postgres through the Postgres ResourceStore,
// again only when it differs from what is sealed (so set_at, and every run masker's stamp, stays).
// Without it the value is set through the API or CLI and the status shows only setAt. No value is
// ever written to the CR. Not Ready, with a reason that says what is wrong: SecretNotFound or
// KeyNotFound (the credential is then deleted from the project in the same pass: fail closed, a run
// that declares it fails as for any missing credential; it is sealed again once the Secret is back),
// SecretUnreadable (Ready Unknown: the Secret could not be read, the last value stays), InvalidValue
// (what the Secret holds breaks a credential rule: the message names the field, never the value; the
// last good value stays), NameTaken (a connected account holds the name), ValueNotSet, KindMismatch
// (the value set through the API is of another kind than the spec says).
import type { Pool } from "pg";
import {
  CLI_KIND_SPELLINGS,
  CredentialResourceSpec,
  FlowError,
  assertCredentialName,
  credentialBodyOfResource,
  credentialKindOfResource,
  parseCredentialValue,
  type CredentialValue,
  type ResourceScope,
  type ResourceStore,
} from "@flowsvc/core";
import { listCredentials, openCredentialValue, type Keyring } from "@flowsvc/store";
import type { ConfigKind, Outcome } from "./reconcile-config.js";
import type { FlowObject } from "./reconcile-kinds.js";
import { canonicalJson } from "./flowrun-summary.js";
import { missOutcome, type SecretRefs } from "./reconcile-secret-refs.js";

export type FlowCredentialObject = FlowObject<CredentialResourceSpec, Record<string, unknown>>;

export interface CredentialDeps {
  pool: Pool;
  keyring: Keyring;
  store: ResourceStore;
  refs: SecretRefs;
}

type Read = { value: CredentialValue } | { outcome: Outcome };

/** The credential the Secrets named by the spec make, or the Outcome that says what is wrong with them (a gone one withdrawn). */
const readFromSecrets = async (deps: CredentialDeps, scope: ResourceScope, name: string, spec: CredentialResourceSpec): Promise<Read> => {
  const namespace = scope.project;
  const valueRef = spec.valueFrom!.secretKeyRef;
  const withdraw = { withdraw: () => deps.store.deleteCredential(scope, name), cleared: { setAt: null } };
  const value = await deps.refs.lookup(namespace, valueRef);
  if (!value.found) return { outcome: await missOutcome(value, { prefix: "valueFrom: ", ...withdraw }) };
  let username: string | undefined;
  const userRef = spec.usernameFrom?.secretKeyRef;
  if (userRef) {
    const user = await deps.refs.lookup(namespace, userRef);
    if (!user.found) return { outcome: await missOutcome(user, { prefix: "usernameFrom: ", ...withdraw }) };
    username = user.value;
  }
  try {
    return {
      value: parseCredentialValue(
        name,
        credentialBodyOfResource(spec, { value: value.value, ...(username !== undefined ? { username } : {}) }),
      ),
    };
  } catch (err) {
    if (!(err instanceof FlowError)) throw err;
    // core's message names the field (token:, password:, username:) and never quotes the value.
    const where = `Secret ${namespace}/${valueRef.name} key ${valueRef.key}${userRef ? ` (username: ${userRef.name} key ${userRef.key})` : ""}`;
    return { outcome: { ready: false, reason: "InvalidValue", message: `${where}: ${err.message}` } };
  }
};

/** Seals `value` unless it is what Postgres holds; a name a connected account holds is NameTaken. */
const sealIfChanged = async (
  deps: CredentialDeps,
  scope: ResourceScope,
  name: string,
  value: CredentialValue,
): Promise<Outcome | undefined> => {
  const current = await openCredentialValue(deps.pool, deps.keyring, scope, name);
  if (current !== undefined && canonicalJson(current) === canonicalJson(value)) return undefined;
  try {
    await deps.store.putCredential(scope, name, value);
    return undefined;
  } catch (err) {
    if (err instanceof FlowError && err.code === "conflict") return { ready: false, reason: "NameTaken", message: err.message };
    throw err;
  }
};

export const credentialKind = (deps: CredentialDeps): ConfigKind<FlowCredentialObject> => ({
  kind: "credential",
  apply: async (obj, scope, name) => {
    assertCredentialName(name);
    const spec = CredentialResourceSpec.parse(obj.spec ?? {});
    if (spec.valueFrom) {
      const read = await readFromSecrets(deps, scope, name, spec);
      if ("outcome" in read) return read.outcome;
      const refused = await sealIfChanged(deps, scope, name, read.value);
      if (refused) return refused;
    }
    const meta = (await listCredentials(deps.pool, scope.projectId)).find((c) => c.name === name);
    if (!meta)
      return {
        ready: false,
        reason: "ValueNotSet",
        message: `no value yet: set one with \`flow credential set ${name} --kind ${spec.kind} ...\`, or name a Secret in spec.valueFrom`,
      };
    const kind = credentialKindOfResource(spec);
    if (meta.kind !== kind)
      return {
        ready: false,
        reason: "KindMismatch",
        message: `the value set through the API is of kind ${CLI_KIND_SPELLINGS[meta.kind]}; spec.kind says ${spec.kind}`,
        fields: { setAt: meta.set_at },
      };
    return { ready: true, fields: { setAt: meta.set_at } };
  },
  remove: (scope, name) => deps.store.deleteCredential(scope, name),
  stored: async (projectId) => (await listCredentials(deps.pool, projectId)).map((c) => ({ name: c.name, writtenAt: new Date(c.set_at) })),
});
