// Object storage with one global resourceVersion counter, as etcd gives the apiserver: every write
// takes the next revision and publishes an event to the watch hub. Generic rules live here
// (optimistic concurrency, generation, the status subresource, finalizers, deletionTimestamp);
// per-kind rules are in kinds.ts.
import { randomUUID } from "node:crypto";
import { alreadyExists, badRequest, conflict, invalid, notFound, ApiError, type KubeObject } from "./api-error.js";
import { prepareCreate, prepareStatus, prepareUpdate, pendingFinalizers, deleteGraceSeconds } from "./kinds.js";
import { comparable, metaOf, nameProblem, randomSuffix, sameJson, timestamp, type Meta } from "./object-meta.js";
import { clone } from "./patch.js";
import { apiVersionOf, type ResourceType } from "./resource-types.js";
import type { EventType, StoredEvent, WatchHub } from "./watch-hub.js";

export interface Target {
  type: ResourceType;
  /** "" for a cluster-scoped resource. */
  namespace: string;
  name: string;
}

export interface DeleteOptions {
  propagationPolicy?: string;
  gracePeriodSeconds?: number;
  preconditions?: { uid?: string; resourceVersion?: string };
}

export type Subresource = "main" | "status";

/** fieldValidation: Strict refuses fields a custom resource's schema does not declare (else they are pruned). */
export interface WriteOptions {
  fieldValidation?: string;
}

const refuseUnknown = (type: ResourceType, pruned: string[], opts: WriteOptions): void => {
  if (opts.fieldValidation !== "Strict" || pruned.length === 0) return;
  const fields = pruned.map((p) => `unknown field "${p}"`).join(", ");
  throw badRequest(`${type.kind} in version "${type.version}" cannot be handled as a ${type.kind}: strict decoding error: ${fields}`);
};

export type CommitListener = (ev: StoredEvent) => void;

const resourceKey = (type: ResourceType): string => `${type.group}/${type.plural}`;
const objectKey = (t: Pick<Target, "type" | "namespace" | "name">): string => `${resourceKey(t.type)}/${t.namespace}/${t.name}`;

/** Everything but metadata (and status, when the status subresource owns it): a change here bumps generation. */
const specPart = (type: ResourceType, obj: KubeObject): unknown => {
  const { metadata: _m, status, ...rest } = obj;
  return type.statusSubresource ? rest : { ...rest, status };
};

/** deletionTimestamp is set once (when the grace period ends); a later delete of grace 0 shortens it. */
const markDeleting = (meta: Meta, grace: number): void => {
  if (meta.deletionTimestamp && grace !== 0) return;
  meta.deletionTimestamp = meta.deletionTimestamp ?? timestamp(Date.now() + grace * 1000);
  meta.deletionGracePeriodSeconds = grace;
};

export class Storage {
  private rv = 0;
  private readonly objects = new Map<string, KubeObject>();
  private readonly listeners: CommitListener[] = [];

  constructor(private readonly hub: WatchHub) {}

  get resourceVersion(): number {
    return this.rv;
  }

  onCommit(listener: CommitListener): void {
    this.listeners.push(listener);
  }

  get(t: Target): KubeObject {
    const obj = this.objects.get(objectKey(t));
    if (!obj) throw notFound(t.type.group, t.type.plural, t.name);
    return this.present(t.type, obj);
  }

  find(t: Target): KubeObject | undefined {
    const obj = this.objects.get(objectKey(t));
    return obj && this.present(t.type, obj);
  }

  /** Objects of a resource (any version), in one namespace or all ("" or undefined). */
  list(type: ResourceType, namespace?: string): KubeObject[] {
    const prefix = namespace ? `${resourceKey(type)}/${namespace}/` : `${resourceKey(type)}/`;
    const keys = [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort();
    return keys.map((k) => this.present(type, this.objects.get(k)!));
  }

  /** Every stored object of every resource: for the garbage collector and the namespace controller. */
  *entries(): Iterable<[string, KubeObject]> {
    for (const [k, v] of this.objects) yield [k.split("/").slice(0, 2).join("/"), v];
  }

  /** The object as served at `type`'s version (storage is shared by every version of a resource). */
  private present(type: ResourceType, obj: KubeObject): KubeObject {
    const out = clone(obj);
    out.apiVersion = apiVersionOf(type);
    return out;
  }

  private commit(type: ResourceType, evType: EventType, obj: KubeObject, prev?: KubeObject): KubeObject {
    this.rv++;
    metaOf(obj).resourceVersion = String(this.rv);
    const key = objectKey({ type, namespace: metaOf(obj).namespace ?? "", name: metaOf(obj).name! });
    if (evType === "DELETED") this.objects.delete(key);
    else this.objects.set(key, obj);
    const ev: StoredEvent = {
      rv: this.rv,
      type: evType,
      resource: resourceKey(type),
      obj: clone(obj),
      ...(prev ? { prev: clone(prev) } : {}),
    };
    this.hub.publish(ev);
    for (const l of this.listeners) l(ev);
    return this.present(type, obj);
  }

  create(t: Omit<Target, "name">, body: KubeObject, opts: WriteOptions = {}): KubeObject {
    const obj = clone(body);
    const meta = metaOf(obj);
    this.checkKind(t.type, obj);
    if (!meta.name && meta.generateName) meta.name = `${meta.generateName}${randomSuffix()}`;
    this.checkNamespace(t, meta);
    const name = meta.name ?? "";
    if (!name)
      throw invalid({ group: t.type.group, kind: t.type.kind, name }, [
        { field: "metadata.name", message: "Required value: name or generateName is required" },
      ]);
    const problem = nameProblem(name, t.type.kind === "Namespace");
    if (problem) throw invalid({ group: t.type.group, kind: t.type.kind, name }, [{ field: "metadata.name", message: problem }]);
    if (this.objects.has(objectKey({ ...t, name }))) throw alreadyExists(t.type.group, t.type.plural, name);
    Object.assign(meta, { uid: randomUUID(), creationTimestamp: timestamp(), generation: 1 });
    for (const k of ["deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "selfLink"]) delete meta[k];
    if (t.type.statusSubresource) delete obj.status;
    refuseUnknown(t.type, prepareCreate(t.type, obj), opts);
    return this.commit(t.type, "ADDED", obj);
  }

  private checkKind(type: ResourceType, obj: KubeObject): void {
    if (obj.kind !== undefined && obj.kind !== type.kind)
      throw badRequest(`the kind of the provided object (${JSON.stringify(obj.kind)}) does not match the resource (${type.kind})`);
    if (obj.apiVersion !== undefined && obj.apiVersion !== apiVersionOf(type)) {
      throw badRequest(
        `the API version in the data (${JSON.stringify(obj.apiVersion)}) does not match the expected API version (${apiVersionOf(type)})`,
      );
    }
    obj.kind = type.kind;
    obj.apiVersion = apiVersionOf(type);
  }

  private checkNamespace(t: Omit<Target, "name">, meta: Meta): void {
    if (!t.type.namespaced) {
      delete meta.namespace;
      return;
    }
    if (meta.namespace && meta.namespace !== t.namespace)
      throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
    meta.namespace = t.namespace;
    const ns = this.objects.get(`/namespaces//${t.namespace}`);
    if (!ns) throw notFound("", "namespaces", t.namespace);
    if (metaOf(ns).deletionTimestamp) {
      throw new ApiError(403, "Forbidden", `unable to create new content in namespace ${t.namespace} because it is being terminated`, {
        name: t.namespace,
        kind: "namespaces",
      });
    }
  }

  private checkPreconditions(t: Target, old: KubeObject, want: { uid?: string; resourceVersion?: string }): void {
    const meta = metaOf(old);
    if (want.uid && want.uid !== meta.uid) {
      throw new ApiError(
        409,
        "Conflict",
        `Operation cannot be fulfilled on ${t.type.plural} "${t.name}": Precondition failed: UID in precondition: ${want.uid}, UID in object meta: ${meta.uid}`,
      );
    }
    if (want.resourceVersion && want.resourceVersion !== meta.resourceVersion) throw conflict(t.type.group, t.type.plural, t.name);
  }

  /** PUT: replaces the object (or only its status), with the body's resourceVersion as a precondition. */
  update(t: Target, body: KubeObject, sub: Subresource, opts: WriteOptions = {}): KubeObject {
    const old = this.objects.get(objectKey(t));
    if (!old) throw notFound(t.type.group, t.type.plural, t.name);
    const obj = clone(body);
    this.checkKind(t.type, obj);
    const meta = metaOf(obj);
    if (meta.name !== undefined && meta.name !== t.name)
      throw badRequest(`the name of the object (${meta.name}) does not match the name on the URL (${t.name})`);
    this.checkPreconditions(t, old, { uid: meta.uid, resourceVersion: meta.resourceVersion });
    const next = sub === "status" ? this.statusOnly(t.type, old, obj, opts) : this.mainOnly(t, old, obj, opts);
    return this.write(t, next, old);
  }

  private statusOnly(type: ResourceType, old: KubeObject, obj: KubeObject, opts: WriteOptions): KubeObject {
    const next = clone(old);
    if (obj.status === undefined) delete next.status;
    else next.status = obj.status;
    refuseUnknown(type, prepareStatus(type, next), opts);
    return next;
  }

  /**
   * Writes `change` of the stored object with no precondition and no per-kind rule: the in-process
   * controllers (garbage collector, namespace and CRD controllers) use it as kube-controller-manager
   * uses the subresources made for it.
   */
  force(t: Target, change: (current: KubeObject) => void): KubeObject | undefined {
    const old = this.objects.get(objectKey(t));
    if (!old) return undefined;
    const next = clone(old);
    change(next);
    return this.write(t, next, old);
  }

  private mainOnly(t: Target, old: KubeObject, obj: KubeObject, opts: WriteOptions): KubeObject {
    const oldMeta = metaOf(old);
    const meta = metaOf(obj);
    const keep = [
      "name",
      "namespace",
      "uid",
      "creationTimestamp",
      "deletionTimestamp",
      "deletionGracePeriodSeconds",
      "generation",
      "resourceVersion",
    ] as const;
    for (const k of keep) {
      if (oldMeta[k] === undefined) delete meta[k];
      else meta[k] = oldMeta[k] as never;
    }
    if (t.type.statusSubresource) {
      if (old.status === undefined) delete obj.status;
      else obj.status = clone(old.status);
    }
    if (oldMeta.deletionTimestamp) {
      const added = (meta.finalizers ?? []).filter((f) => !(oldMeta.finalizers ?? []).includes(f));
      if (added.length)
        throw invalid({ group: t.type.group, kind: t.type.kind, name: t.name }, [
          {
            field: "metadata.finalizers",
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"${added.join('", "')}"}`,
          },
        ]);
    }
    refuseUnknown(t.type, prepareUpdate(t.type, obj, old), opts);
    if (!sameJson(specPart(t.type, obj), specPart(t.type, old))) meta.generation = (oldMeta.generation ?? 1) + 1;
    return obj;
  }

  /** Commits `next` over `old` unless nothing changed; removes it when deletion waits on no finalizer. */
  private write(t: Target, next: KubeObject, old: KubeObject): KubeObject {
    if (sameJson(comparable(next), comparable(old))) return this.present(t.type, old);
    const meta = metaOf(next);
    if (meta.deletionTimestamp && pendingFinalizers(t.type, next).length === 0 && !meta.deletionGracePeriodSeconds) {
      return this.commit(t.type, "DELETED", next, old);
    }
    return this.commit(t.type, "MODIFIED", next, old);
  }

  /** Applies `change` to the current object and writes the result (a patch, or an internal controller's edit). */
  modify(t: Target, change: (current: KubeObject) => KubeObject, sub: Subresource, opts: WriteOptions = {}): KubeObject {
    const old = this.objects.get(objectKey(t));
    if (!old) throw notFound(t.type.group, t.type.plural, t.name);
    const changed = change(this.present(t.type, old));
    const meta = metaOf(changed);
    if (meta.resourceVersion !== metaOf(old).resourceVersion && meta.resourceVersion !== undefined && meta.resourceVersion !== "") {
      throw conflict(t.type.group, t.type.plural, t.name);
    }
    return this.update(t, { ...changed, metadata: { ...meta, resourceVersion: metaOf(old).resourceVersion } }, sub, opts);
  }

  /**
   * DELETE: with finalizers left (or a bound Pod's grace period), sets deletionTimestamp and keeps the
   * object; otherwise removes it. Returns the object as it is after the call.
   */
  delete(t: Target, opts: DeleteOptions = {}): KubeObject {
    const old = this.objects.get(objectKey(t));
    if (!old) throw notFound(t.type.group, t.type.plural, t.name);
    this.checkPreconditions(t, old, opts.preconditions ?? {});
    const next = clone(old);
    const meta = metaOf(next);
    if (opts.propagationPolicy === "Foreground" && !(meta.finalizers ?? []).includes("foregroundDeletion"))
      meta.finalizers = [...(meta.finalizers ?? []), "foregroundDeletion"];
    const grace = deleteGraceSeconds(t.type, next, opts.gracePeriodSeconds) ?? 0;
    if (pendingFinalizers(t.type, next).length === 0 && grace === 0) return this.commit(t.type, "DELETED", next, old);
    markDeleting(meta, grace);
    return this.write(t, next, old);
  }
}
