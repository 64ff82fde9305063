// How a flowsvc name (a handler's `Deploy_Check`, a secret's `API_TOKEN`) and a custom resource's
// metadata.name (a DNS subdomain: lower-case, `-` and `.`) map to each other, in one place for the
// Kubernetes ResourceStore (API -> CR) and the reconcilers (CR -> Postgres).
//   - A CR names its resource by the annotation `flowsvc.io/name` when it has one (the API writes it
//     whenever the two differ), else by its metadata.name: as is for handlers and hooks (a DNS name
//     is a valid handler or hook name), upper-cased with `-` and `.` as `_` for a secret, so that a
//     GitOps manifest `metadata: {name: api-token}` sets API_TOKEN.
//   - The API's name becomes metadata.name lower-cased with `_` as `-`, made a DNS name when it is
//     not one (a trailing `-` or `.` dropped, a short digest appended so two names never meet).
import { createHash } from "node:crypto";
import type { KubernetesObject } from "@kubernetes/client-node";
import { KUBE_NAME } from "@flowsvc/core";
import type { FlowKindName } from "./reconcile-kinds.js";

export const NAME_ANNOTATION = "flowsvc.io/name";

/** The flowsvc name a metadata.name stands for without an annotation. */
const implicitName = (kind: FlowKindName, objectName: string): string =>
  kind === "secret" ? objectName.toUpperCase().replace(/[-.]/g, "_") : objectName;

/** The flowsvc name of a custom resource. */
export const flowNameOf = (kind: FlowKindName, o: KubernetesObject): string =>
  o.metadata?.annotations?.[NAME_ANNOTATION] ?? implicitName(kind, o.metadata?.name ?? "");

/** The metadata.name and, when it does not say the name by itself, the annotation, for a flowsvc name. */
export const objectNameFor = (kind: FlowKindName, name: string): { name: string; annotations?: Record<string, string> } => {
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
  return implicitName(kind, objectName) === name ? { name: objectName } : { name: objectName, annotations: { [NAME_ANNOTATION]: name } };
};
