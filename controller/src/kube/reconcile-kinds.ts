// The flowsvc.io kinds the reconcilers watch and write (docs/internals.md "Reconcilers"; the names
// are fixed by the operator contract), and the small shapes every reconciler shares.
import type { KubernetesObject } from "@kubernetes/client-node";

export const FLOWSVC_GROUP = "flowsvc.io";
export const FLOWSVC_VERSION = "v1alpha1";
export const FLOWSVC_API_VERSION = `${FLOWSVC_GROUP}/${FLOWSVC_VERSION}`;

/** The namespace label naming a project's org (contract: one namespace is one project). */
export const ORG_LABEL = "flowsvc.io/org";
export const DEFAULT_ORG = "default";

export const FLOW_KINDS = {
  handler: { kind: "FlowHandler", plural: "flowhandlers" },
  hook: { kind: "FlowEventHook", plural: "floweventhooks" },
  secret: { kind: "FlowSecret", plural: "flowsecrets" },
  credential: { kind: "FlowCredential", plural: "flowcredentials" },
  graph: { kind: "FlowGraph", plural: "flowgraphs" },
  run: { kind: "FlowRun", plural: "flowruns" },
} as const;
export type FlowKindName = keyof typeof FLOW_KINDS;

/** A condition in the Kubernetes convention. */
export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

/** One of our custom objects, as the API answers it (spec and status typed by each reconciler). */
export interface FlowObject<Spec = unknown, Status = unknown> extends KubernetesObject {
  spec?: Spec;
  status?: Status;
}

/** `namespace/name` of an object. */
export const keyOf = (o: KubernetesObject): string => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;

/** The time format Kubernetes writes (RFC 3339, seconds). */
export const kubeTime = (d: Date): string => d.toISOString().replace(/\.\d{3}Z$/, "Z");
