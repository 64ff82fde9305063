// Per-kind rules of the built-in resources the fake serves, as their registry strategies in
// kube-apiserver apply them: Pod defaults, status and spec immutability, Secret stringData,
// Namespace lifecycle, CustomResourceDefinition and NetworkPolicy validation, custom resources (and
// built-in kinds given a schema) against their schema, and a custom resource's update against its
// schema's transition rule `self == oldSelf` (the one CEL rule the fake evaluates).
import { badRequest, invalid, ApiError, type KubeObject } from "./api-error.js";
import { validateCrd } from "./crd.js";
import { metaOf, rec } from "./object-meta.js";
import { clone } from "./patch.js";
import type { ResourceType } from "./resource-types.js";
import { validateNetworkPolicy } from "./network-policy.js";
import { checkTransitionRules, pruneAndValidate } from "./schema.js";

type Obj = Record<string, unknown>;

export const CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io";

const fail = (type: ResourceType, obj: KubeObject, causes: { field: string; message: string }[]): void => {
  if (causes.length) throw invalid({ group: type.group, kind: type.kind, name: metaOf(obj).name ?? "" }, causes);
};

const preparePod = (type: ResourceType, obj: KubeObject): void => {
  const spec = rec(obj.spec);
  const containers = Array.isArray(spec.containers) ? (spec.containers as Obj[]) : [];
  const causes: { field: string; message: string }[] = [];
  if (containers.length === 0) causes.push({ field: "spec.containers", message: "Required value" });
  containers.forEach((c, i) => {
    if (!c.name) causes.push({ field: `spec.containers[${i}].name`, message: "Required value" });
    if (!c.image) causes.push({ field: `spec.containers[${i}].image`, message: "Required value" });
  });
  fail(type, obj, causes);
  obj.spec = {
    restartPolicy: "Always",
    terminationGracePeriodSeconds: 30,
    dnsPolicy: "ClusterFirst",
    schedulerName: "default-scheduler",
    ...spec,
  };
  obj.status = { phase: "Pending", qosClass: "BestEffort" };
};

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** stringData is write-only: merged into data (base64) and never stored. */
const prepareSecret = (obj: KubeObject): void => {
  const data = { ...rec(obj.data) };
  for (const [k, v] of Object.entries(data)) {
    if (typeof v !== "string" || v.length % 4 !== 0 || !BASE64.test(v))
      throw badRequest(`Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0 (data.${k})`);
  }
  for (const [k, v] of Object.entries(rec(obj.stringData))) data[k] = Buffer.from(String(v as string), "utf8").toString("base64");
  delete obj.stringData;
  if (Object.keys(data).length) obj.data = data;
  obj.type = obj.type ?? "Opaque";
};

/** Rules on create; returns the fields pruned from a custom resource (unknown to its schema). */
export const prepareCreate = (type: ResourceType, obj: KubeObject): string[] => {
  const pruned = type.schema ? pruneAndValidate(type, obj) : [];
  if (type.builtin) prepareBuiltinCreate(type, obj);
  return pruned;
};

const prepareBuiltinCreate = (type: ResourceType, obj: KubeObject): void => {
  switch (type.kind) {
    case "Pod":
      return preparePod(type, obj);
    case "Secret":
      return prepareSecret(obj);
    case "Namespace": {
      const meta = metaOf(obj);
      meta.labels = { ...meta.labels, "kubernetes.io/metadata.name": meta.name! };
      obj.spec = { finalizers: ["kubernetes"] };
      obj.status = { phase: "Active" };
      return;
    }
    case "NetworkPolicy":
      return fail(type, obj, validateNetworkPolicy(obj));
    case "CustomResourceDefinition": {
      fail(type, obj, validateCrd(obj));
      const meta = metaOf(obj);
      meta.finalizers = [...(meta.finalizers ?? []).filter((f) => f !== CRD_CLEANUP_FINALIZER), CRD_CLEANUP_FINALIZER];
      return;
    }
  }
};

/** A status write of a custom resource is pruned and validated like any other write. */
export const prepareStatus = (type: ResourceType, obj: KubeObject): string[] =>
  !type.builtin && type.schema ? pruneAndValidate(type, obj) : [];

/** Pod spec is immutable but for container images, activeDeadlineSeconds and added tolerations. */
const checkPodUpdate = (type: ResourceType, obj: KubeObject, old: KubeObject): void => {
  const strip = (o: KubeObject): Obj => {
    const spec = clone(rec(o.spec));
    for (const key of ["containers", "initContainers"])
      if (Array.isArray(spec[key])) spec[key] = (spec[key] as Obj[]).map(({ image: _i, ...c }) => c);
    delete spec.activeDeadlineSeconds;
    delete spec.tolerations;
    return spec;
  };
  if (JSON.stringify(strip(obj)) !== JSON.stringify(strip(old))) {
    fail(type, obj, [
      {
        field: "spec",
        message:
          "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
      },
    ]);
  }
};

/** Rules on update; returns the fields pruned from a custom resource (unknown to its schema). */
export const prepareUpdate = (type: ResourceType, obj: KubeObject, old: KubeObject): string[] => {
  const pruned = type.schema ? pruneAndValidate(type, obj) : [];
  if (type.builtin) prepareBuiltinUpdate(type, obj, old);
  else if (type.schema) checkTransitionRules(type, obj, old);
  return pruned;
};

const prepareBuiltinUpdate = (type: ResourceType, obj: KubeObject, old: KubeObject): void => {
  switch (type.kind) {
    case "Pod":
      return checkPodUpdate(type, obj, old);
    case "Secret":
      if (old.immutable === true && (JSON.stringify(obj.data) !== JSON.stringify(old.data) || obj.immutable !== true)) {
        fail(type, obj, [{ field: "data", message: "Forbidden: field is immutable when `immutable` is set" }]);
      }
      return prepareSecret(obj);
    case "Namespace":
      obj.spec = old.spec;
      return;
    case "NetworkPolicy":
      return fail(type, obj, validateNetworkPolicy(obj));
    case "CustomResourceDefinition":
      fail(type, obj, validateCrd(obj));
      if (rec(obj.spec).group !== rec(old.spec).group)
        fail(type, obj, [{ field: "spec.group", message: "Invalid value: field is immutable" }]);
      return;
  }
};

/** Finalizers that hold a deletion: metadata.finalizers, and a Namespace's spec.finalizers. */
export const pendingFinalizers = (type: ResourceType, obj: KubeObject): string[] => {
  const meta = metaOf(obj).finalizers ?? [];
  const spec = type.builtin && type.kind === "Namespace" ? ((rec(obj.spec).finalizers ?? []) as string[]) : [];
  return [...meta, ...spec];
};

/**
 * The grace period a deletion waits for (only a Pod bound to a node and not terminal has one: its
 * kubelet confirms with a delete of grace 0). 0 or undefined: delete now.
 */
export const deleteGraceSeconds = (type: ResourceType, obj: KubeObject, requested: number | undefined): number | undefined => {
  if (!type.builtin || type.kind !== "Pod") return undefined;
  if (requested !== undefined && (!Number.isInteger(requested) || requested < 0))
    throw new ApiError(422, "Invalid", "gracePeriodSeconds must be a non-negative integer");
  const spec = rec(obj.spec);
  const phase = rec(obj.status).phase;
  if (!spec.nodeName || phase === "Succeeded" || phase === "Failed") return 0;
  if (requested !== undefined) return requested;
  const meta = metaOf(obj);
  if (meta.deletionTimestamp) return meta.deletionGracePeriodSeconds;
  return typeof spec.terminationGracePeriodSeconds === "number" ? spec.terminationGracePeriodSeconds : 30;
};
