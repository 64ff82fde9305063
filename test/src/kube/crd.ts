// CustomResourceDefinition (apiextensions.k8s.io/v1): its validation, and the resource types a
// CRD makes servable (one per served version, with names, categories, printer columns and schema).
import type { KubeObject } from "./api-error.js";
import { metaOf, rec, str } from "./object-meta.js";
import type { PrinterColumn, ResourceType } from "./resource-types.js";

type Obj = Record<string, unknown>;
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

interface Cause {
  field: string;
  message: string;
}

const validateNames = (spec: Obj, name: string): Cause[] => {
  const names = rec(spec.names);
  const causes: Cause[] = [];
  if (!spec.group) causes.push({ field: "spec.group", message: "Required value" });
  if (!names.plural) causes.push({ field: "spec.names.plural", message: "Required value" });
  if (!names.kind) causes.push({ field: "spec.names.kind", message: "Required value" });
  if (names.plural && spec.group && name !== `${str(names.plural)}.${str(spec.group)}`) {
    causes.push({ field: "metadata.name", message: `Invalid value: "${name}": must be spec.names.plural+"."+spec.group` });
  }
  if (spec.scope !== "Namespaced" && spec.scope !== "Cluster")
    causes.push({ field: "spec.scope", message: `Unsupported value: "${str(spec.scope)}": supported values: "Cluster", "Namespaced"` });
  return causes;
};

const validateVersions = (spec: Obj): Cause[] => {
  const versions = Array.isArray(spec.versions) ? (spec.versions as Obj[]) : [];
  const causes: Cause[] = [];
  if (versions.length === 0)
    causes.push({ field: "spec.versions", message: "Invalid value: must have exactly one version marked as storage version" });
  else if (versions.filter((v) => v.storage === true).length !== 1)
    causes.push({ field: "spec.versions", message: "Invalid value: must have exactly one version marked as storage version" });
  versions.forEach((v, i) => {
    if (!v.name) causes.push({ field: `spec.versions[${i}].name`, message: "Required value" });
    if (!rec(v.schema).openAPIV3Schema)
      causes.push({ field: `spec.versions[${i}].schema.openAPIV3Schema`, message: "Required value: schemas are required" });
    else if (rec(rec(v.schema).openAPIV3Schema).type !== "object")
      causes.push({ field: `spec.versions[${i}].schema.openAPIV3Schema.type`, message: 'Unsupported value: must be "object" at the root' });
  });
  return causes;
};

export const validateCrd = (crd: KubeObject): Cause[] => {
  const spec = rec(crd.spec);
  return [...validateNames(spec, metaOf(crd).name ?? ""), ...validateVersions(spec)];
};

const columnsOf = (version: Obj): PrinterColumn[] => {
  const cols = Array.isArray(version.additionalPrinterColumns) ? (version.additionalPrinterColumns as PrinterColumn[]) : [];
  if (cols.length) return cols;
  return [{ name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" }];
};

/** The types a CRD serves: one per version with `served: true`. */
export const crdTypes = (crd: KubeObject): ResourceType[] => {
  const spec = rec(crd.spec);
  const names = rec(spec.names);
  const versions = (Array.isArray(spec.versions) ? (spec.versions as Obj[]) : []).filter((v) => v.served !== false);
  return versions.map((v) => ({
    group: str(spec.group),
    version: str(v.name),
    kind: str(names.kind),
    listKind: typeof names.listKind === "string" ? names.listKind : `${str(names.kind)}List`,
    plural: str(names.plural),
    singular: typeof names.singular === "string" ? names.singular : str(names.kind).toLowerCase(),
    namespaced: spec.scope === "Namespaced",
    shortNames: strings(names.shortNames),
    categories: strings(names.categories),
    statusSubresource: rec(v.subresources).status !== undefined,
    builtin: false,
    columns: columnsOf(v),
    selectableFields: (Array.isArray(v.selectableFields) ? (v.selectableFields as Obj[]) : []).map((f) =>
      str(f.jsonPath).replace(/^\./, ""),
    ),
    schema: rec(rec(v.schema).openAPIV3Schema),
  }));
};

/** The status the apiextensions controller writes once a CRD's names are accepted. */
export const establishedStatus = (crd: KubeObject, now: string): Obj => {
  const spec = rec(crd.spec);
  const names = rec(spec.names);
  const accepted = {
    ...names,
    singular: names.singular ?? str(names.kind).toLowerCase(),
    listKind: names.listKind ?? `${str(names.kind)}List`,
  };
  const storage = (Array.isArray(spec.versions) ? (spec.versions as Obj[]) : []).find((v) => v.storage === true);
  const condition = (type: string, reason: string, message: string): Obj => ({
    type,
    status: "True",
    lastTransitionTime: now,
    reason,
    message,
  });
  return {
    acceptedNames: accepted,
    storedVersions: storage ? [storage.name] : [],
    conditions: [
      condition("NamesAccepted", "NoConflicts", "no conflicts found"),
      condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
    ],
  };
};
