// The resource types the fake serves: the built-in ones and those a CustomResourceDefinition adds.
// A type is addressed by group, version and plural, as in the REST path.
import { NETWORK_POLICY_SCHEMA } from "./network-policy.js";

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  format?: string;
  description?: string;
  priority?: number;
}

export interface ResourceType {
  group: string;
  version: string;
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  /** Has a `/status` subresource: status is written only there, spec only through the main resource. */
  statusSubresource: boolean;
  /** Built-in kinds take strategic merge patches; custom resources do not. */
  builtin: boolean;
  columns: PrinterColumn[];
  /** Fields a fieldSelector may name, besides metadata.name and metadata.namespace. */
  selectableFields: string[];
  /**
   * The structural schema of a custom resource version (openAPIV3Schema), for pruning and validation;
   * of a built-in kind whose fields the fake checks (NetworkPolicy), its OpenAPI schema.
   */
  schema?: Record<string, unknown>;
}

export const apiVersionOf = (t: Pick<ResourceType, "group" | "version">): string => (t.group ? `${t.group}/${t.version}` : t.version);

const age: PrinterColumn = { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" };

type BuiltinInput = Pick<ResourceType, "group" | "version" | "kind" | "plural" | "namespaced"> & Partial<ResourceType>;

const builtin = (t: BuiltinInput): ResourceType => ({
  listKind: `${t.kind}List`,
  singular: t.kind.toLowerCase(),
  shortNames: [],
  categories: [],
  statusSubresource: false,
  builtin: true,
  columns: [age],
  selectableFields: [],
  ...t,
});

export const builtinTypes = (): ResourceType[] => [
  builtin({
    group: "",
    version: "v1",
    kind: "Namespace",
    plural: "namespaces",
    namespaced: false,
    shortNames: ["ns"],
    statusSubresource: true,
    columns: [{ name: "Status", type: "string", jsonPath: ".status.phase" }, age],
    selectableFields: ["status.phase"],
  }),
  builtin({
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    namespaced: true,
    columns: [{ name: "Type", type: "string", jsonPath: ".type" }, age],
    selectableFields: ["type"],
  }),
  builtin({ group: "", version: "v1", kind: "ConfigMap", plural: "configmaps", namespaced: true, shortNames: ["cm"] }),
  builtin({ group: "", version: "v1", kind: "ServiceAccount", plural: "serviceaccounts", namespaced: true, shortNames: ["sa"] }),
  builtin({
    group: "",
    version: "v1",
    kind: "Pod",
    plural: "pods",
    namespaced: true,
    shortNames: ["po"],
    categories: ["all"],
    statusSubresource: true,
    columns: [
      { name: "Status", type: "string", jsonPath: ".status.phase" },
      { name: "Node", type: "string", jsonPath: ".spec.nodeName" },
      age,
    ],
    selectableFields: [
      "spec.nodeName",
      "spec.restartPolicy",
      "spec.schedulerName",
      "spec.serviceAccountName",
      "status.phase",
      "status.podIP",
    ],
  }),
  builtin({ group: "", version: "v1", kind: "Node", plural: "nodes", namespaced: false, shortNames: ["no"], statusSubresource: true }),
  builtin({ group: "", version: "v1", kind: "Event", plural: "events", namespaced: true, shortNames: ["ev"] }),
  builtin({
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    plural: "leases",
    namespaced: true,
    columns: [{ name: "Holder", type: "string", jsonPath: ".spec.holderIdentity" }, age],
  }),
  // Stored as they are (no controller behind them), so a rendered chart can be applied whole.
  builtin({
    group: "",
    version: "v1",
    kind: "Service",
    plural: "services",
    namespaced: true,
    shortNames: ["svc"],
    categories: ["all"],
    statusSubresource: true,
  }),
  builtin({
    group: "apps",
    version: "v1",
    kind: "Deployment",
    plural: "deployments",
    namespaced: true,
    shortNames: ["deploy"],
    categories: ["all"],
    statusSubresource: true,
  }),
  builtin({
    group: "policy",
    version: "v1",
    kind: "PodDisruptionBudget",
    plural: "poddisruptionbudgets",
    namespaced: true,
    shortNames: ["pdb"],
    statusSubresource: true,
  }),
  builtin({
    group: "networking.k8s.io",
    version: "v1",
    kind: "Ingress",
    plural: "ingresses",
    namespaced: true,
    shortNames: ["ing"],
    statusSubresource: true,
  }),
  // Stored as given, its fields and rules checked (network-policy.ts); nothing enforces it.
  builtin({
    group: "networking.k8s.io",
    version: "v1",
    kind: "NetworkPolicy",
    plural: "networkpolicies",
    namespaced: true,
    shortNames: ["netpol"],
    schema: NETWORK_POLICY_SCHEMA,
  }),
  ...(["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"] as const).map((kind) =>
    builtin({
      group: "rbac.authorization.k8s.io",
      version: "v1",
      kind,
      plural: `${kind.toLowerCase()}s`,
      namespaced: !kind.startsWith("Cluster"),
    }),
  ),
  builtin({
    group: "apiextensions.k8s.io",
    version: "v1",
    kind: "CustomResourceDefinition",
    plural: "customresourcedefinitions",
    namespaced: false,
    shortNames: ["crd", "crds"],
    categories: ["api-extensions"],
    statusSubresource: true,
    columns: [{ name: "Created At", type: "date", jsonPath: ".metadata.creationTimestamp" }],
  }),
];

/** Every served type, found by REST path segments or by the names kubectl resolves. */
export class TypeRegistry {
  private readonly types = new Map<string, ResourceType>();

  constructor() {
    for (const t of builtinTypes()) this.add(t);
  }

  private static key(group: string, version: string, plural: string): string {
    return `${group}/${version}/${plural}`;
  }

  add(t: ResourceType): void {
    this.types.set(TypeRegistry.key(t.group, t.version, t.plural), t);
  }

  /** Removes every version of a custom group/plural (the CRD that served it is gone). */
  removeAll(group: string, plural: string): void {
    for (const [k, t] of this.types) if (t.group === group && t.plural === plural && !t.builtin) this.types.delete(k);
  }

  get(group: string, version: string, plural: string): ResourceType | undefined {
    return this.types.get(TypeRegistry.key(group, version, plural));
  }

  all(): ResourceType[] {
    return [...this.types.values()];
  }

  /** Group name -> versions served, core group as "". */
  groups(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const t of this.types.values()) {
      const versions = out.get(t.group) ?? [];
      if (!versions.includes(t.version)) versions.push(t.version);
      out.set(t.group, versions);
    }
    return out;
  }

  inGroupVersion(group: string, version: string): ResourceType[] {
    return this.all().filter((t) => t.group === group && t.version === version);
  }
}
