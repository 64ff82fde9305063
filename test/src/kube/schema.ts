// A custom resource against its CRD's structural schema, as the apiextensions apiserver does on every
// write: unknown fields are pruned (unless x-kubernetes-preserve-unknown-fields), defaults filled in,
// then types, required, enum, bounds and patterns validated; any failure is a 422 Invalid.
import { invalid, type KubeObject } from "./api-error.js";
import { metaOf } from "./object-meta.js";
import type { ResourceType } from "./resource-types.js";

type Obj = Record<string, unknown>;
type Schema = Obj;

interface Cause {
  field: string;
  message: string;
}

/** What a walk found: validation failures, and the fields it pruned (unknown to the schema). */
interface Found {
  causes: Cause[];
  pruned: string[];
}

const rec = (v: unknown): Obj => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

const typeOfValue = (v: unknown): string => {
  if (Array.isArray(v)) return "array";
  if (v === null) return "null";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
};

const typeMatches = (schema: Schema, v: unknown): boolean => {
  const actual = typeOfValue(v);
  if (schema["x-kubernetes-int-or-string"] === true) return actual === "integer" || actual === "string";
  const want = schema.type;
  if (want === undefined) return true;
  return want === actual || (want === "number" && actual === "integer");
};

const checkScalar = (schema: Schema, v: unknown, path: string, found: Found): void => {
  const shown = JSON.stringify(v);
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === shown)) {
    found.causes.push({ field: path, message: `Unsupported value: ${shown}: supported values: ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}` });
  }
  if (typeof v === "string") {
    if (typeof schema.maxLength === "number" && v.length > schema.maxLength) found.causes.push({ field: path, message: `Too long: may not be more than ${schema.maxLength} bytes` });
    if (typeof schema.minLength === "number" && v.length < schema.minLength) found.causes.push({ field: path, message: `Invalid value: ${shown}: ${path.replace(/^\./, "")} in body should be at least ${schema.minLength} chars long` });
    if (typeof schema.pattern === "string" && !new RegExp(schema.pattern, "u").test(v)) found.causes.push({ field: path, message: `Invalid value: ${shown}: ${path.replace(/^\./, "")} in body should match '${schema.pattern}'` });
  }
  if (typeof v === "number") {
    if (typeof schema.minimum === "number" && v < schema.minimum) found.causes.push({ field: path, message: `Invalid value: ${v}: ${path.replace(/^\./, "")} in body should be greater than or equal to ${schema.minimum}` });
    if (typeof schema.maximum === "number" && v > schema.maximum) found.causes.push({ field: path, message: `Invalid value: ${v}: ${path.replace(/^\./, "")} in body should be less than or equal to ${schema.maximum}` });
  }
};

const walkObject = (schema: Schema, value: Obj, path: string, found: Found): Obj => {
  const props = rec(schema.properties);
  const extra = schema.additionalProperties;
  const out: Obj = {};
  for (const [k, v] of Object.entries(value)) {
    const sub = props[k] ?? (isObj(extra) ? extra : undefined);
    if (sub) out[k] = walk(rec(sub), v, `${path}.${k}`, found);
    else if (schema["x-kubernetes-preserve-unknown-fields"] === true || extra === true) out[k] = v;
    else found.pruned.push(`${path}.${k}`);
  }
  for (const [k, sub] of Object.entries(props)) if (!(k in out) && rec(sub).default !== undefined) out[k] = structuredClone(rec(sub).default);
  for (const r of Array.isArray(schema.required) ? (schema.required as string[]) : []) if (!(r in out)) found.causes.push({ field: `${path}.${r}`, message: "Required value" });
  return out;
};

const walkArray = (schema: Schema, value: unknown[], path: string, found: Found): unknown[] => {
  if (typeof schema.maxItems === "number" && value.length > schema.maxItems) found.causes.push({ field: path, message: `Too many: ${value.length}: must have at most ${schema.maxItems} items` });
  const items = rec(schema.items);
  return value.map((v, i) => walk(items, v, `${path}[${i}]`, found));
};

const walk = (schema: Schema, value: unknown, path: string, found: Found): unknown => {
  if (value === null && schema.nullable === true) return null;
  if (!typeMatches(schema, value)) {
    const actual = typeOfValue(value);
    found.causes.push({ field: path, message: `Invalid value: "${actual}": ${path.replace(/^\./, "")} in body must be of type ${String(schema.type as string)}: "${actual}"` });
    return value;
  }
  if (isObj(value)) return walkObject(schema, value, path, found);
  if (Array.isArray(value)) return walkArray(schema, value, path, found);
  checkScalar(schema, value, path, found);
  return value;
};

/**
 * Prunes, defaults and validates `obj` in place against `type.schema`; throws 422 Invalid on a
 * failure. Returns the pruned field paths (fieldValidation=Strict refuses a write that has any).
 */
export const pruneAndValidate = (type: ResourceType, obj: KubeObject): string[] => {
  const schema = type.schema ?? {};
  const { apiVersion, kind, metadata, ...rest } = obj;
  const found: Found = { causes: [], pruned: [] };
  const bodySchema: Schema = { ...schema, properties: { ...rec(schema.properties) } };
  for (const k of ["apiVersion", "kind", "metadata"]) delete rec(bodySchema.properties)[k];
  bodySchema.required = (Array.isArray(schema.required) ? (schema.required as string[]) : []).filter((r) => !["apiVersion", "kind", "metadata"].includes(r));
  const pruned = walkObject(bodySchema, rest, "", found);
  for (const k of Object.keys(obj)) delete obj[k];
  Object.assign(obj, { apiVersion, kind, metadata }, pruned);
  const fixed = found.causes.map((c) => ({ ...c, field: c.field.replace(/^\./, "") }));
  if (fixed.length) throw invalid({ group: type.group, kind: type.kind, name: metaOf(obj).name ?? "" }, fixed);
  return found.pruned.map((p) => p.replace(/^\./, ""));
};
