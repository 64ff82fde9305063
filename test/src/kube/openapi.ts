// The OpenAPI v3 discovery kubectl reads before apply/create: /openapi/v3 lists a document per
// group-version, and each document's PATCH operations carry their group-version-kind and the
// `fieldValidation` query parameter, so kubectl leaves validation to the server (it sends
// fieldValidation=Strict). Only custom kinds' schemas are published (for `kubectl explain`); the PATCH
// operations declare no strategic-merge body, so kubectl computes client-side apply patches from its
// compiled-in types (built-in kinds: strategic merge) or as JSON merge patches (custom kinds).
import type { KubeObject } from "./api-error.js";
import type { ResourceType, TypeRegistry } from "./resource-types.js";

const gvPath = (group: string, version: string): string => (group ? `apis/${group}/${version}` : `api/${version}`);

export const openApiRoot = (registry: TypeRegistry, rv: number): KubeObject => {
  const paths: Record<string, unknown> = {};
  for (const [group, versions] of registry.groups()) {
    for (const v of versions)
      paths[gvPath(group, v)] = { serverRelativeURL: `/openapi/v3/${gvPath(group, v)}?hash=${rv.toString(16).padStart(16, "0")}` };
  }
  return { paths };
};

const PARAMS = ["fieldValidation", "fieldManager", "dryRun", "force"].map((name) => ({
  name,
  in: "query",
  schema: { type: name === "force" ? "boolean" : "string" },
  uniqueItems: true,
}));

const operationsOf = (t: ResourceType): [string, unknown][] => {
  const base = `/${gvPath(t.group, t.version)}${t.namespaced ? "/namespaces/{namespace}" : ""}/${t.plural}`;
  const gvk = { group: t.group, version: t.version, kind: t.kind };
  const op = (action: string): Record<string, unknown> => ({
    "x-kubernetes-action": action,
    "x-kubernetes-group-version-kind": gvk,
    parameters: PARAMS,
    responses: {},
  });
  return [
    [base, { get: op("list"), post: op("post") }],
    [`${base}/{name}`, { get: op("get"), put: op("put"), patch: op("patch"), delete: op("delete") }],
  ];
};

const schemaOf = (t: ResourceType): [string, unknown] => [
  `${t.group.split(".").reverse().join(".")}.${t.version}.${t.kind}`,
  { ...t.schema, "x-kubernetes-group-version-kind": [{ group: t.group, version: t.version, kind: t.kind }] },
];

export const openApiGroupVersion = (registry: TypeRegistry, path: string): KubeObject | undefined => {
  const types = registry.all().filter((t) => gvPath(t.group, t.version) === path);
  if (types.length === 0) return undefined;
  return {
    openapi: "3.0.0",
    info: { title: "Kubernetes", version: "v1.32.0" },
    paths: Object.fromEntries(types.flatMap(operationsOf)),
    // A custom kind's schema, so `kubectl explain` can walk it (as a real apiserver publishes CRD schemas).
    components: { schemas: Object.fromEntries(types.filter((t) => !t.builtin && t.schema).map(schemaOf)) },
  };
};
