// Discovery documents (the legacy, unaggregated form: kubectl falls back to it when the answer is
// plain application/json): /version, /api, /apis, /apis/<group>, and the resource lists.
import type { KubeObject } from "./api-error.js";
import type { ResourceType, TypeRegistry } from "./resource-types.js";

const VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

export const versionInfo = (): KubeObject => ({
  major: "1",
  minor: "32",
  gitVersion: "v1.32.0-flowsvc-fake",
  gitCommit: "0000000000000000000000000000000000000000",
  gitTreeState: "clean",
  buildDate: "2026-01-01T00:00:00Z",
  goVersion: "go1.23.0",
  compiler: "gc",
  platform: "linux/amd64",
});

export const coreVersions = (host: string): KubeObject => ({
  kind: "APIVersions",
  versions: ["v1"],
  serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: host }],
});

const groupDoc = (name: string, versions: string[]): KubeObject => {
  const list = versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
  return { name, versions: list, preferredVersion: list[0] };
};

export const groupList = (registry: TypeRegistry): KubeObject => ({
  kind: "APIGroupList",
  apiVersion: "v1",
  groups: [...registry.groups()].filter(([g]) => g !== "").map(([g, versions]) => groupDoc(g, versions)),
});

export const group = (registry: TypeRegistry, name: string): KubeObject | undefined => {
  const versions = registry.groups().get(name);
  return versions && name ? { kind: "APIGroup", apiVersion: "v1", ...groupDoc(name, versions) } : undefined;
};

const resourceEntries = (t: ResourceType): KubeObject[] => {
  const main = {
    name: t.plural,
    singularName: t.singular,
    namespaced: t.namespaced,
    kind: t.kind,
    verbs: VERBS,
    ...(t.shortNames.length ? { shortNames: t.shortNames } : {}),
    ...(t.categories.length ? { categories: t.categories } : {}),
  };
  const subs: KubeObject[] = [];
  if (t.statusSubresource)
    subs.push({ name: `${t.plural}/status`, singularName: "", namespaced: t.namespaced, kind: t.kind, verbs: ["get", "patch", "update"] });
  if (t.builtin && t.kind === "Pod")
    subs.push({ name: "pods/binding", singularName: "", namespaced: true, kind: "Binding", verbs: ["create"] });
  return [main, ...subs];
};

export const resourceList = (registry: TypeRegistry, groupName: string, version: string): KubeObject | undefined => {
  const types = registry.inGroupVersion(groupName, version);
  if (types.length === 0) return undefined;
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: groupName ? `${groupName}/${version}` : version,
    resources: types.flatMap(resourceEntries),
  };
};
