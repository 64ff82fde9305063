// A custom resource against its CRD's structural schema, as the apiextensions apiserver does on every
// write: unknown fields are pruned (unless x-kubernetes-preserve-unknown-fields), defaults filled in,
// then types, required, enum, bounds and patterns validated; any failure is a 422 Invalid. On an
// update, the transition rule `self == oldSelf` (the one CEL rule evaluated here) refuses a change.
import { invalid, type KubeObject } from "./api-error.js";
import { metaOf, rec, str } from "./object-meta.js";
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

const bare = (path: string): string => path.replace(/^\./, "");

const checkString = (schema: Schema, v: string, path: string, found: Found): void => {
  const shown = JSON.stringify(v);
  if (typeof schema.maxLength === "number" && v.length > schema.maxLength)
    found.causes.push({ field: path, message: `Too long: may not be more than ${schema.maxLength} bytes` });
  if (typeof schema.minLength === "number" && v.length < schema.minLength)
    found.causes.push({
      field: path,
      message: `Invalid value: ${shown}: ${bare(path)} in body should be at least ${schema.minLength} chars long`,
    });
  if (typeof schema.pattern === "string" && !new RegExp(schema.pattern, "u").test(v))
    found.causes.push({ field: path, message: `Invalid value: ${shown}: ${bare(path)} in body should match '${schema.pattern}'` });
};

const checkNumber = (schema: Schema, v: number, path: string, found: Found): void => {
  if (typeof schema.minimum === "number" && v < schema.minimum)
    found.causes.push({
      field: path,
      message: `Invalid value: ${v}: ${bare(path)} in body should be greater than or equal to ${schema.minimum}`,
    });
  if (typeof schema.maximum === "number" && v > schema.maximum)
    found.causes.push({
      field: path,
      message: `Invalid value: ${v}: ${bare(path)} in body should be less than or equal to ${schema.maximum}`,
    });
};

const checkScalar = (schema: Schema, v: unknown, path: string, found: Found): void => {
  const shown = JSON.stringify(v);
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === shown)) {
    found.causes.push({
      field: path,
      message: `Unsupported value: ${shown}: supported values: ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`,
    });
  }
  if (typeof v === "string") checkString(schema, v, path, found);
  if (typeof v === "number") checkNumber(schema, v, path, found);
};

const fillDefaults = (props: Obj, out: Obj): void => {
  for (const [k, sub] of Object.entries(props))
    if (!(k in out) && rec(sub).default !== undefined) out[k] = structuredClone(rec(sub).default);
};

const keepUnknown = (schema: Schema): boolean =>
  schema["x-kubernetes-preserve-unknown-fields"] === true || schema.additionalProperties === true;

const walkObject = (schema: Schema, value: Obj, path: string, found: Found): Obj => {
  const props = rec(schema.properties);
  const extra = schema.additionalProperties;
  const out: Obj = {};
  for (const [k, v] of Object.entries(value)) {
    const sub = props[k] ?? (isObj(extra) ? extra : undefined);
    if (sub) out[k] = walk(rec(sub), v, `${path}.${k}`, found);
    else if (keepUnknown(schema)) out[k] = v;
    else found.pruned.push(`${path}.${k}`);
  }
  fillDefaults(props, out);
  for (const r of Array.isArray(schema.required) ? (schema.required as string[]) : [])
    if (!(r in out)) found.causes.push({ field: `${path}.${r}`, message: "Required value" });
  return out;
};

const walkArray = (schema: Schema, value: unknown[], path: string, found: Found): unknown[] => {
  if (typeof schema.maxItems === "number" && value.length > schema.maxItems)
    found.causes.push({ field: path, message: `Too many: ${value.length}: must have at most ${schema.maxItems} items` });
  const items = rec(schema.items);
  return value.map((v, i) => walk(items, v, `${path}[${i}]`, found));
};

const walk = (schema: Schema, value: unknown, path: string, found: Found): unknown => {
  if (value === null && schema.nullable === true) return null;
  if (!typeMatches(schema, value)) {
    const actual = typeOfValue(value);
    found.causes.push({
      field: path,
      message: `Invalid value: "${actual}": ${path.replace(/^\./, "")} in body must be of type ${str(schema.type)}: "${actual}"`,
    });
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
  bodySchema.required = (Array.isArray(schema.required) ? (schema.required as string[]) : []).filter(
    (r) => !["apiVersion", "kind", "metadata"].includes(r),
  );
  const pruned = walkObject(bodySchema, rest, "", found);
  for (const k of Object.keys(obj)) delete obj[k];
  Object.assign(obj, { apiVersion, kind, metadata }, pruned);
  const fixed = found.causes.map((c) => ({ ...c, field: c.field.replace(/^\./, "") }));
  if (fixed.length) throw invalid({ group: type.group, kind: type.kind, name: metaOf(obj).name ?? "" }, fixed);
  return found.pruned.map((p) => p.replace(/^\./, ""));
};

/** The one CEL rule the fake evaluates: the transition rule that makes a field immutable once set. */
export const IMMUTABLE_RULE = "self == oldSelf";

const rulesOf = (schema: Schema): Obj[] =>
  Array.isArray(schema["x-kubernetes-validations"]) ? (schema["x-kubernetes-validations"] as Obj[]) : [];

/** A failed transition rule's cause, as kube-apiserver v1.32 words it: field.Invalid(path, <the schema's type>, message or "failed rule: <rule>"). */
const transitionCause = (schema: Schema, rule: Obj, path: string): Cause => {
  const message = typeof rule.message === "string" && rule.message ? rule.message : `failed rule: ${IMMUTABLE_RULE}`;
  return { field: path, message: `Invalid value: "${str(schema.type)}": ${message}` };
};

/** A value and its old one, where a transition rule applies: both present and not null. */
interface Pair {
  value: unknown;
  old: unknown;
}

/**
 * A node's transition rules against its old value, then its properties' (a transition rule runs only
 * where both the new and the old value exist and are not null). Only `self == oldSelf` is
 * evaluated (CEL equality: maps regardless of key order); any other rule is not (no CEL here).
 */
const walkTransitions = (schema: Schema, { value, old }: Pair, path: string, causes: Cause[]): void => {
  if (value === undefined || value === null || old === undefined || old === null) return;
  for (const rule of rulesOf(schema))
    if (rule.rule === IMMUTABLE_RULE && !sameValue(value, old)) causes.push(transitionCause(schema, rule, path));
  if (!isObj(value) || !isObj(old)) return;
  for (const [k, sub] of Object.entries(rec(schema.properties)))
    walkTransitions(rec(sub), { value: value[k], old: old[k] }, `${path}.${k}`, causes);
};

const canonical = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(canonical)
    : isObj(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, canonical(v[k])]),
        )
      : v;
const sameValue = (a: unknown, b: unknown): boolean => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));

/**
 * An update of a custom resource against the transition rules (`x-kubernetes-validations` that use
 * oldSelf) of its schema, after pruning and defaulting: a failure is a 422 Invalid naming the field.
 */
export const checkTransitionRules = (type: ResourceType, obj: KubeObject, old: KubeObject): void => {
  const schema = type.schema ?? {};
  const causes: Cause[] = [];
  for (const [k, sub] of Object.entries(rec(schema.properties)))
    if (k !== "metadata") walkTransitions(rec(sub), { value: obj[k], old: old[k] }, k, causes);
  if (causes.length) throw invalid({ group: type.group, kind: type.kind, name: metaOf(obj).name ?? "" }, causes);
};
