// The CustomResourceDefinitions of flowsvc's declarative resources, generated from the zod schemas
// of this directory (one source of truth): z.toJSONSchema, then made structural as the apiextensions
// apiserver requires (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema).
// Pure: scripts/gen-crds.mjs writes the result to crds/ as YAML. A kind is one entry of CRD_KINDS.
import { z } from "zod";
import { HandlerResourceSpec } from "./handler.js";
import { HookResourceSpec } from "./hook.js";
import { RunSubmission } from "./run.js";
import { SecretResourceSpec } from "./secret.js";
import { CredentialResourceSpec } from "./credential.js";
import { GraphResourceSpec } from "./graph.js";
import { CredentialStatus, GraphStatus, HandlerStatus, HookStatus, RunResourceStatus, SecretStatus } from "./status.js";

export const CRD_GROUP = "flowsvc.io";
export const CRD_VERSION = "v1alpha1";
export const CRD_CATEGORY = "flowsvc";

type Json = Record<string, unknown>;

export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description?: string;
  priority?: number;
}

export interface CrdKind {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  description: string;
  spec: z.ZodType;
  /** Whether an object may leave out `spec` (a FlowSecret set through the API has nothing to say). */
  specOptional?: boolean;
  status: z.ZodType;
  columns: PrinterColumn[];
  /** The message of a transition rule `self == oldSelf` on `spec`: the apiserver refuses any change to it (422). */
  specImmutable?: string;
}

/** What the apiserver answers an edit of a submitted FlowRun's spec (`spec: Invalid value: "object": <this>`). */
export const FLOWRUN_SPEC_IMMUTABLE = "spec is immutable once submitted";

const age: PrinterColumn = { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" };
const condition = (type: string): PrinterColumn => ({
  name: type,
  type: "string",
  jsonPath: `.status.conditions[?(@.type=="${type}")].status`,
  description: `The ${type} condition's status`,
});

/** The kinds, in the contract's order (docs: k8s-contract "CRDs"). */
export const CRD_KINDS: readonly CrdKind[] = [
  {
    kind: "FlowHandler",
    plural: "flowhandlers",
    singular: "flowhandler",
    shortNames: ["fh"],
    description:
      "A handler: a script flowsvc runs for each event whose type matches. The project is the namespace; the name is the handler's.",
    spec: HandlerResourceSpec,
    status: HandlerStatus,
    columns: [{ name: "Events", type: "string", jsonPath: ".spec.events", description: "Event type patterns" }, condition("Ready"), age],
  },
  {
    kind: "FlowEventHook",
    plural: "floweventhooks",
    singular: "floweventhook",
    shortNames: ["feh"],
    description:
      "An inbound event hook: an URL that turns HTTP deliveries into events. Its secrets come from Kubernetes Secrets or are minted.",
    spec: HookResourceSpec,
    status: HookStatus,
    columns: [{ name: "URL", type: "string", jsonPath: ".status.url", description: "Where senders post" }, condition("Ready"), age],
  },
  {
    kind: "FlowSecret",
    plural: "flowsecrets",
    singular: "flowsecret",
    shortNames: ["fsec"],
    description: "A project secret. Never a value: either spec.valueFrom.secretKeyRef, or a value set through the API (status.setAt).",
    spec: SecretResourceSpec,
    specOptional: true,
    status: SecretStatus,
    columns: [
      { name: "Source", type: "string", jsonPath: ".spec.valueFrom.secretKeyRef.name", description: "The Kubernetes Secret read" },
      { name: "Set", type: "date", jsonPath: ".status.setAt", description: "When the value was last sealed" },
      condition("Ready"),
      age,
    ],
  },
  {
    kind: "FlowCredential",
    plural: "flowcredentials",
    singular: "flowcredential",
    shortNames: ["fcred"],
    description:
      "A credential (bearer, api-key, basic, url-token). Never a value: either spec.valueFrom.secretKeyRef, or a value set through the API (status.setAt).",
    spec: CredentialResourceSpec,
    status: CredentialStatus,
    columns: [
      { name: "Kind", type: "string", jsonPath: ".spec.kind", description: "bearer, api-key, basic or url-token" },
      condition("Ready"),
      { name: "Set", type: "date", jsonPath: ".status.setAt", description: "When the value was last sealed" },
      age,
    ],
  },
  {
    kind: "FlowGraph",
    plural: "flowgraphs",
    singular: "flowgraph",
    shortNames: ["fg"],
    description:
      "A stored graph: the spec is the flowsvc-graph/v1 document (version, nodes, edges). Ready=False says which paths break a rule.",
    spec: GraphResourceSpec,
    status: GraphStatus,
    columns: [condition("Ready"), age],
  },
  {
    kind: "FlowRun",
    plural: "flowruns",
    singular: "flowrun",
    shortNames: ["fr"],
    description:
      "A run. Applied with kubectl it is submitted (its uid is the idempotency key; its spec cannot change after); runs started otherwise are mirrored here.",
    spec: RunSubmission,
    status: RunResourceStatus,
    specImmutable: FLOWRUN_SPEC_IMMUTABLE,
    columns: [
      { name: "Status", type: "string", jsonPath: ".status.status" },
      { name: "Substate", type: "string", jsonPath: ".status.substate" },
      age,
      { name: "Duration", type: "string", jsonPath: ".status.duration", description: "From start to finish" },
    ],
  },
];

/** Keys a structural schema may carry (besides x-kubernetes-*); the rest of JSON Schema is dropped. */
const KEPT = new Set([
  "type",
  "format",
  "description",
  "properties",
  "required",
  "items",
  "additionalProperties",
  "enum",
  "default",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "minLength",
  "maxLength",
  "pattern",
  "minItems",
  "maxItems",
  "uniqueItems",
  "nullable",
  "anyOf",
]);

const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * A union of objects (a discriminated union such as a handler's reaction) as one object: every
 * branch's properties, required only what every branch requires; core's parser checks the branch.
 * A property only some branches have keeps no `default`: the apiserver would write it into an
 * object of every branch (a script reaction stored with a node's `config: {}`, which the strict
 * script branch then refuses); core's parser applies the branch's own default.
 */
const objectUnion = (branches: Json[], path: string): Json => {
  const props = new Map<string, Json[]>();
  for (const b of branches)
    for (const [k, v] of Object.entries(isObj(b.properties) ? b.properties : {})) props.set(k, [...(props.get(k) ?? []), v as Json]);
  const required = branches
    .map((b) => (Array.isArray(b.required) ? (b.required as string[]) : []))
    .reduce((all, r) => all.filter((x) => r.includes(x)));
  const same = (vs: Json[]): boolean => vs.every((v) => JSON.stringify(v) === JSON.stringify(vs[0]));
  const merged = (k: string, vs: Json[]): Json => {
    const one = same(vs) ? vs[0]! : structuralUnion(vs, `${path}.${k}`);
    if (vs.length === branches.length || one.default === undefined) return one;
    const { default: _dropped, ...rest } = one;
    return rest;
  };
  const properties = Object.fromEntries([...props].map(([k, vs]) => [k, merged(k, vs)]));
  return { type: "object", properties, ...(required.length > 0 ? { required } : {}) };
};

/** `anyOf` stays only where Kubernetes allows it: branches of one scalar type, the type on the node itself. */
const structuralUnion = (branches: Json[], path: string): Json => {
  const types = new Set(branches.map((b) => b.type));
  const type = [...types][0];
  if (types.size === 1 && type === "object" && branches.every((b) => isObj(b.properties))) return objectUnion(branches, path);
  if (types.size !== 1 || typeof type !== "string" || type === "object" || type === "array")
    throw new Error(`${path}: a union of ${[...types].join(", ")} has no structural form; give the field one type`);
  const enums = branches.flatMap((b): unknown[] => (Array.isArray(b.enum) ? (b.enum as unknown[]) : []));
  if (enums.length === branches.length) return { type, enum: enums };
  return { type, anyOf: branches.map(({ type: _t, description: _d, default: _v, nullable: _n, ...rest }) => rest) };
};

const pruneKeys = (schema: Json): Json => {
  const out: Json = {};
  // In KEPT's order (type first), then the extensions: the YAML reads the same whatever zod's order.
  for (const k of KEPT) if (schema[k] !== undefined) out[k] = schema[k];
  for (const [k, v] of Object.entries(schema)) if (k.startsWith("x-kubernetes-")) out[k] = v;
  // A date-time's format is what Kubernetes checks; zod's long pattern for it adds nothing.
  if (out.format === "date-time") delete out.pattern;
  // zod's bounds of a safe integer are the implicit ones.
  if (out.maximum === Number.MAX_SAFE_INTEGER) delete out.maximum;
  if (out.minimum === Number.MIN_SAFE_INTEGER) delete out.minimum;
  if (out.type === "integer") out.format = "int64";
  return out;
};

/**
 * A JSON Schema from z.toJSONSchema made structural: no `$ref` (inlined), a `type` on every node
 * (free JSON becomes x-kubernetes-preserve-unknown-fields), no `additionalProperties: false` (the
 * apiserver prunes unknown fields and `--validate=strict` refuses them), unions only of one scalar type.
 */
export const structural = (schema: Json, path = "", defs: Json = {}): Json => {
  if (typeof schema.$ref === "string") {
    const target = defs[schema.$ref.replace(/^#\/(\$defs|definitions)\//, "")];
    if (!isObj(target)) throw new Error(`${path}: unresolved ${schema.$ref}`);
    return structural({ ...target, ...(schema.description ? { description: schema.description } : {}) }, path, defs);
  }
  const union = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(union)) {
    const branches = union.map((b: Json) => structural(b, path, defs));
    return { ...pruneKeys({ ...schema, anyOf: undefined, oneOf: undefined }), ...structuralUnion(branches, path) };
  }
  return structuralChildren(pruneKeys(schema), path, defs);
};

/** A node's own keys done; its children made structural, and what Kubernetes refuses dropped. */
const structuralChildren = (out: Json, path: string, defs: Json): Json => {
  const free = out["x-kubernetes-preserve-unknown-fields"] === true || out["x-kubernetes-int-or-string"] === true;
  if (out.type === undefined && !free) out["x-kubernetes-preserve-unknown-fields"] = true;
  if (isObj(out.properties))
    out.properties = Object.fromEntries(Object.entries(out.properties).map(([k, v]) => [k, structural(v as Json, `${path}.${k}`, defs)]));
  if (isObj(out.items)) out.items = structural(out.items, `${path}[]`, defs);
  if (isObj(out.additionalProperties)) out.additionalProperties = structural(out.additionalProperties, `${path}.*`, defs);
  else delete out.additionalProperties;
  if (Array.isArray(out.required) && out.required.length === 0) delete out.required;
  return out;
};

/** A zod schema as a structural OpenAPI v3 schema: the shape a write must have (io "input": defaulted fields are optional). */
export const structuralOf = (schema: z.ZodType, path: string): Json => {
  const json = z.toJSONSchema(schema, { io: "input", target: "openapi-3.0", unrepresentable: "any", reused: "inline" }) as Json;
  const defs = isObj(json.$defs) ? json.$defs : isObj(json.definitions) ? json.definitions : {};
  return structural(json, path, defs);
};

const openApiOf = (k: CrdKind): Json => ({
  type: "object",
  description: k.description,
  properties: {
    apiVersion: { type: "string", description: "flowsvc.io/v1alpha1" },
    kind: { type: "string", description: k.kind },
    metadata: { type: "object" },
    spec: {
      ...structuralOf(k.spec, ".spec"),
      ...(k.specImmutable ? { "x-kubernetes-validations": [{ rule: "self == oldSelf", message: k.specImmutable }] } : {}),
    },
    status: { ...structuralOf(k.status, ".status"), description: "Written by the flowsvc controller." },
  },
  ...(k.specOptional ? {} : { required: ["spec"] }),
});

/** The CustomResourceDefinition of one kind (apiextensions.k8s.io/v1). */
export const crdOf = (k: CrdKind): Json => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: `${k.plural}.${CRD_GROUP}`, labels: { "app.kubernetes.io/part-of": "flowsvc" } },
  spec: {
    group: CRD_GROUP,
    scope: "Namespaced",
    names: {
      kind: k.kind,
      listKind: `${k.kind}List`,
      plural: k.plural,
      singular: k.singular,
      shortNames: k.shortNames,
      categories: [CRD_CATEGORY],
    },
    versions: [
      {
        name: CRD_VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: k.columns,
        schema: { openAPIV3Schema: openApiOf(k) },
      },
    ],
  },
});

/** Every CRD, one per kind, in CRD_KINDS' order. */
export const flowsvcCrds = (): Json[] => CRD_KINDS.map(crdOf);
