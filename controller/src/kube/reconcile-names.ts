// How a flowsvc name (a handler's `Deploy_Check`, a secret's `API_TOKEN`) and a custom resource's
// metadata.name (a DNS subdomain: lower-case, `-` and `.`) map to each other, in one place for the
// Kubernetes ResourceStore (API -> CR) and the reconcilers (CR -> Postgres).
//   - A FlowSecret: core's rule (spec.secretName, else `api-token` is API_TOKEN; resourceOfSecretName
//     the other way).
//   - A FlowHandler or FlowEventHook: the annotation `flowsvc.io/name` when it has one (the API
//     writes it whenever the two differ), else its metadata.name (a DNS name is a valid handler or
//     hook name).
//   - The API's name becomes metadata.name lower-cased with `_` as `-`, made a DNS name when it is
//     not one (a trailing `-` or `.` dropped, a short digest appended so two names never meet).
import { createHash } from "node:crypto";
import type { KubernetesObject } from "@kubernetes/client-node";
import { KUBE_NAME, resourceOfSecretName, secretNameOfResource } from "@flowsvc/core";
import type { FlowKindName } from "./reconcile-kinds.js";

export const NAME_ANNOTATION = "flowsvc.io/name";

/** The flowsvc name of a custom resource (a FlowSecret's is core's rule: spec.secretName, else `api-token` -> `API_TOKEN`). */
export const flowNameOf = (kind: FlowKindName, o: KubernetesObject & { spec?: unknown }): string => {
  if (kind === "secret") return secretNameOfResource(o.metadata?.name ?? "", o.spec ?? {});
  return o.metadata?.annotations?.[NAME_ANNOTATION] ?? o.metadata?.name ?? "";
};

/** The metadata.name and spec.secretName of the FlowSecret that stands for a secret (core's rule). */
export const secretObjectFor = (name: string): { name: string; secretName?: string } => {
  const r = resourceOfSecretName(name);
  return r.secretName === undefined ? { name: r.metadataName } : { name: r.metadataName, secretName: r.secretName };
};

/** The metadata.name and, when it does not say the name by itself, the annotation, for a flowsvc name. */
export const objectNameFor = (kind: FlowKindName, name: string): { name: string; annotations?: Record<string, string> } => {
  if (kind === "secret") return { name: secretObjectFor(name).name };
  let objectName = name.toLowerCase().replace(/_/g, "-");
  if (!KUBE_NAME.test(objectName) || objectName.length > 253) {
    const digest = createHash("sha256").update(name).digest("hex").slice(0, 8);
    objectName = `${
      objectName
        .replace(/[^a-z0-9.-]/g, "-")
        .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "")
        .slice(0, 200) || "x"
    }-${digest}`;
  }
  return objectName === name ? { name: objectName } : { name: objectName, annotations: { [NAME_ANNOTATION]: name } };
};
