// REST paths as kube-apiserver lays them out:
//   /api/v1/<plural>[/<name>[/<subresource>]]                       (cluster scope, or all namespaces)
//   /api/v1/namespaces/<ns>/<plural>[/<name>[/<subresource>]]
//   /apis/<group>/<version>/...                                    (the same under a named group)
// and the discovery paths around them.
import type { ResourceType, TypeRegistry } from "./resource-types.js";

export type Route =
  | { kind: "discovery"; doc: "version" | "api" | "apis" | "openapi" | "healthz" }
  | { kind: "group"; group: string }
  | { kind: "resources"; group: string; version: string }
  | { kind: "resource"; type: ResourceType; namespace: string; name?: string; sub?: string }
  | { kind: "unknown" };

const DISCOVERY: Record<string, Route> = {
  "/version": { kind: "discovery", doc: "version" },
  "/api": { kind: "discovery", doc: "api" },
  "/apis": { kind: "discovery", doc: "apis" },
  "/healthz": { kind: "discovery", doc: "healthz" },
  "/livez": { kind: "discovery", doc: "healthz" },
  "/readyz": { kind: "discovery", doc: "healthz" },
};

/** Splits `/api/v1/...` or `/apis/g/v/...` into group, version and the rest. */
const splitPrefix = (parts: string[]): { group: string; version: string; rest: string[] } | undefined => {
  if (parts[0] === "api" && parts[1]) return { group: "", version: parts[1], rest: parts.slice(2) };
  if (parts[0] === "apis" && parts[1] && parts[2]) return { group: parts[1], version: parts[2], rest: parts.slice(3) };
  return undefined;
};

/** `namespaces/<ns>/<plural>...` is a namespaced resource; `namespaces/<name>[/status]` is a Namespace. */
const isNamespacedPath = (registry: TypeRegistry, gv: { group: string; version: string }, rest: string[]): boolean =>
  rest[0] === "namespaces" && rest.length >= 3 && registry.get(gv.group, gv.version, rest[2]!)?.namespaced === true;

const resourceRoute = (registry: TypeRegistry, gv: { group: string; version: string }, rest: string[]): Route => {
  const { group, version } = gv;
  const nsScoped = isNamespacedPath(registry, gv, rest);
  const namespace = nsScoped ? rest[1]! : "";
  const tail = nsScoped ? rest.slice(2) : rest;
  const type = registry.get(group, version, tail[0]!);
  if (!type || tail.length > 3) return { kind: "unknown" };
  if (type.namespaced && !nsScoped && tail.length > 1) return { kind: "unknown" };
  return { kind: "resource", type, namespace, ...(tail[1] ? { name: tail[1] } : {}), ...(tail[2] ? { sub: tail[2] } : {}) };
};

export const route = (registry: TypeRegistry, pathname: string): Route => {
  const fixed = DISCOVERY[pathname];
  if (fixed) return fixed;
  if (pathname.startsWith("/openapi/")) return { kind: "discovery", doc: "openapi" };
  const parts = pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "apis" && parts.length === 2) return { kind: "group", group: parts[1]! };
  const gv = splitPrefix(parts);
  if (!gv) return { kind: "unknown" };
  if (gv.rest.length === 0) return { kind: "resources", group: gv.group, version: gv.version };
  return resourceRoute(registry, gv, gv.rest);
};
