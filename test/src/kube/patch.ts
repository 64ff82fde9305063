// The patch formats the apiserver accepts: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and,
// for built-in kinds only, strategic merge patch as far as kubectl's client-side apply uses it
// (lists merged by their patch merge key, `$patch` and `$setElementOrder`/`$deleteFromPrimitiveList`
// directives, `$retainKeys`).
import { badRequest, ApiError } from "./api-error.js";

type Json = unknown;
type Obj = Record<string, Json>;

const isObj = (v: Json): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

export const clone = <T>(v: T): T => structuredClone(v);

export const mergePatch = (target: Json, patch: Json): Json => {
  if (!isObj(patch)) return clone(patch);
  const out: Obj = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
};

// ---- RFC 6902 ----

interface Op {
  op: string;
  path: string;
  value?: Json;
  from?: string;
}

const pointer = (path: string): string[] => {
  if (path === "") return [];
  if (!path.startsWith("/")) throw badRequest(`invalid JSON pointer "${path}"`);
  return path
    .slice(1)
    .split("/")
    .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"));
};

const parentOf = (doc: Json, parts: string[], path: string): Json => {
  let cur = doc;
  for (const p of parts.slice(0, -1)) {
    cur = Array.isArray(cur) ? cur[Number(p)] : isObj(cur) ? cur[p] : undefined;
    if (cur === undefined)
      throw new ApiError(422, "Invalid", `the server rejected our request due to an error in our request: doc is missing path: "${path}"`);
  }
  return cur;
};

const indexIn = (arr: Json[], key: string, forAdd: boolean, path: string): number => {
  const i = key === "-" && forAdd ? arr.length : /^(0|[1-9][0-9]*)$/.test(key) ? Number(key) : -1;
  if (i < 0 || i > arr.length || (!forAdd && i === arr.length))
    throw new ApiError(422, "Invalid", `the server rejected our request: index out of range in "${path}"`);
  return i;
};

const readAt = (doc: Json, path: string): Json => {
  const parts = pointer(path);
  if (parts.length === 0) return doc;
  const parent = parentOf(doc, parts, path);
  const key = parts[parts.length - 1]!;
  const v: unknown = Array.isArray(parent)
    ? (parent as unknown[])[indexIn(parent, key, false, path)]
    : isObj(parent)
      ? parent[key]
      : undefined;
  if (v === undefined)
    throw new ApiError(422, "Invalid", `the server rejected our request due to an error in our request: missing value at "${path}"`);
  return v;
};

const removeAt = (doc: Json, path: string): Json => {
  const parts = pointer(path);
  const parent = parentOf(doc, parts, path);
  const key = parts[parts.length - 1]!;
  readAt(doc, path);
  if (Array.isArray(parent)) parent.splice(indexIn(parent, key, false, path), 1);
  else delete (parent as Obj)[key];
  return doc;
};

const addAt = (doc: Json, path: string, value: Json, replace: boolean): Json => {
  const parts = pointer(path);
  if (parts.length === 0) return clone(value);
  const parent = parentOf(doc, parts, path);
  const key = parts[parts.length - 1]!;
  if (replace) readAt(doc, path);
  if (Array.isArray(parent)) parent.splice(indexIn(parent, key, !replace, path), replace ? 1 : 0, clone(value));
  else if (isObj(parent)) parent[key] = clone(value);
  else throw new ApiError(422, "Invalid", `the server rejected our request: no object at "${path}"`);
  return doc;
};

const applyOp = (doc: Json, op: Op): Json => {
  switch (op.op) {
    case "add":
      return addAt(doc, op.path, op.value, false);
    case "replace":
      return addAt(doc, op.path, op.value, true);
    case "remove":
      return removeAt(doc, op.path);
    case "copy":
      return addAt(doc, op.path, readAt(doc, op.from ?? ""), false);
    case "move": {
      const v = readAt(doc, op.from ?? "");
      return addAt(removeAt(doc, op.from ?? ""), op.path, v, false);
    }
    case "test":
      if (JSON.stringify(readAt(doc, op.path)) !== JSON.stringify(op.value))
        throw new ApiError(422, "Invalid", `the server rejected our request: testing value ${op.path} failed`);
      return doc;
    default:
      throw badRequest(`Unexpected kind: ${op.op}`);
  }
};

export const jsonPatch = (target: Json, ops: Json): Json => {
  if (!Array.isArray(ops)) throw badRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
  return (ops as Op[]).reduce((doc, op) => applyOp(doc, op), clone(target));
};

// ---- strategic merge patch (the subset client-side apply sends for built-in kinds) ----

/** Patch merge keys of the lists that merge rather than replace (from the Kubernetes API types). */
const MERGE_KEYS: Record<string, string> = {
  containers: "name",
  initContainers: "name",
  ephemeralContainers: "name",
  env: "name",
  volumes: "name",
  volumeMounts: "mountPath",
  volumeDevices: "devicePath",
  ports: "containerPort",
  conditions: "type",
  ownerReferences: "uid",
  imagePullSecrets: "name",
  secrets: "name",
  hostAliases: "ip",
  topologySpreadConstraints: "topologyKey",
};
/** Primitive lists with a merge strategy (a set). */
const MERGED_PRIMITIVE_LISTS = new Set(["finalizers"]);

const mergeKeyedList = (target: Json[], patch: Json[], key: string): Json[] => {
  const out = [...target];
  for (const item of patch) {
    if (!isObj(item)) continue;
    const at = out.findIndex((t) => isObj(t) && t[key] === item[key]);
    if (item.$patch === "delete") {
      if (at >= 0) out.splice(at, 1);
    } else if (at >= 0) out[at] = strategicMerge(out[at], item);
    else out.push(strategicMerge({}, item));
  }
  return out;
};

const mergeList = (field: string, target: Json, patch: Json[]): Json[] => {
  const base: unknown[] = Array.isArray(target) ? (target as unknown[]) : [];
  if (patch.some((p) => isObj(p) && p.$patch === "replace")) return clone(patch.filter((p) => !(isObj(p) && p.$patch === "replace")));
  // containers' ports merge by containerPort, a Service's by port
  const key = field === "ports" && !patch.some((p) => isObj(p) && "containerPort" in p) ? "port" : MERGE_KEYS[field];
  if (key) return mergeKeyedList(base, patch, key);
  if (MERGED_PRIMITIVE_LISTS.has(field)) return [...base, ...patch.filter((p) => !base.includes(p))];
  return clone(patch);
};

const applyDirectives = (out: Obj, patch: Obj): void => {
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith("$deleteFromPrimitiveList/") && Array.isArray(v)) {
      const field = k.slice("$deleteFromPrimitiveList/".length);
      const list = out[field];
      if (Array.isArray(list)) out[field] = list.filter((x) => !v.includes(x));
    }
  }
  const retain = patch.$retainKeys;
  if (Array.isArray(retain)) for (const k of Object.keys(out)) if (!retain.includes(k)) delete out[k];
};

export const strategicMerge = (target: Json, patch: Json): Json => {
  if (!isObj(patch)) return clone(patch);
  if (patch.$patch === "replace") {
    const { $patch: _drop, ...rest } = patch;
    return clone(rest);
  }
  if (patch.$patch === "delete") return {};
  const out: Obj = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith("$")) continue;
    if (v === null) delete out[k];
    else if (Array.isArray(v)) out[k] = mergeList(k, out[k], v);
    else out[k] = strategicMerge(out[k], v);
  }
  applyDirectives(out, patch);
  return out;
};
