// The parts of kube-controller-manager and the apiextensions apiserver the fake needs to behave as a
// cluster does: the CRD controller (names accepted, Established, cleanup of a deleted CRD's objects),
// the namespace controller (a deleted namespace empties, then goes), and the garbage collector
// (ownerReferences: background, foreground and dangling owners). They run after each commit, off the
// request path, as in a cluster.
import type { KubeObject } from "./api-error.js";
import { crdTypes, establishedStatus } from "./crd.js";
import { CRD_CLEANUP_FINALIZER } from "./kinds.js";
import { metaOf, type OwnerReference, rec, str, timestamp } from "./object-meta.js";
import type { ResourceType, TypeRegistry } from "./resource-types.js";
import type { Storage, Target } from "./storage.js";
import type { StoredEvent } from "./watch-hub.js";

type Obj = Record<string, unknown>;

export class Controllers {
  private queued = false;
  private readonly pending: (() => void)[] = [];

  constructor(
    private readonly storage: Storage,
    private readonly registry: TypeRegistry,
  ) {
    storage.onCommit((ev) => this.observe(ev));
  }

  /** Runs `work` after the current request, swallowing the races a controller tolerates (object gone). */
  private later(work: () => void): void {
    this.pending.push(work);
    if (this.queued) return;
    this.queued = true;
    setImmediate(() => {
      this.queued = false;
      for (const w of this.pending.splice(0)) {
        try {
          w();
        } catch {
          // the object changed or went meanwhile; the next event brings it back here
        }
      }
    });
  }

  private typeOf(resource: string): ResourceType | undefined {
    const [group, plural] = resource.split("/");
    return this.registry.all().find((t) => t.group === group && t.plural === plural);
  }

  private targetOf(type: ResourceType, obj: KubeObject): Target {
    const meta = metaOf(obj);
    return { type, namespace: meta.namespace ?? "", name: meta.name ?? "" };
  }

  private observe(ev: StoredEvent): void {
    const type = this.typeOf(ev.resource);
    if (ev.resource === "apiextensions.k8s.io/customresourcedefinitions") this.observeCrd(ev);
    if (!type) return;
    if (ev.resource === "/namespaces" && metaOf(ev.obj).deletionTimestamp) this.later(() => this.drainNamespace(type, ev.obj));
    if (ev.type === "DELETED") {
      const uid = metaOf(ev.obj).uid!;
      this.later(() => this.collectDependents(uid));
      this.later(() => this.recheckTerminating());
    } else if (metaOf(ev.obj).deletionTimestamp && (metaOf(ev.obj).finalizers ?? []).includes("foregroundDeletion")) {
      this.later(() => this.foreground(type, ev.obj));
    }
    if (ev.type === "ADDED" && metaOf(ev.obj).ownerReferences?.length) this.later(() => this.collectIfOrphaned(type, ev.obj));
  }

  // ---- CRDs ----

  private observeCrd(ev: StoredEvent): void {
    const crd = ev.obj;
    const spec = rec(crd.spec);
    const plural = str(rec(spec.names).plural);
    this.registry.removeAll(str(spec.group), plural);
    if (ev.type === "DELETED") return;
    for (const t of crdTypes(crd)) this.registry.add(t);
    const crdType = this.typeOf(ev.resource)!;
    const conditions = (rec(crd.status).conditions ?? []) as Obj[];
    if (!conditions.some((c) => c.type === "Established")) {
      this.later(() => this.storage.force(this.targetOf(crdType, crd), (o) => void (o.status = establishedStatus(o, timestamp()))));
    }
    if (metaOf(crd).deletionTimestamp) this.later(() => this.cleanupCrd(crdType, crd));
  }

  private cleanupCrd(crdType: ResourceType, crd: KubeObject): void {
    const spec = rec(crd.spec);
    const resource = `${str(spec.group)}/${str(rec(spec.names).plural)}`;
    const type = this.typeOf(resource);
    const left = type ? this.storage.list(type) : [];
    for (const obj of left) if (!metaOf(obj).deletionTimestamp) this.storage.delete(this.targetOf(type!, obj));
    if (left.length === 0) {
      this.storage.force(
        this.targetOf(crdType, crd),
        (o) => void (metaOf(o).finalizers = (metaOf(o).finalizers ?? []).filter((f) => f !== CRD_CLEANUP_FINALIZER)),
      );
    }
  }

  // ---- namespaces ----

  private drainNamespace(nsType: ResourceType, ns: KubeObject): void {
    const name = metaOf(ns).name!;
    let left = 0;
    for (const [resource, obj] of [...this.storage.entries()]) {
      if (metaOf(obj).namespace !== name) continue;
      left++;
      const type = this.typeOf(resource);
      if (type && !metaOf(obj).deletionTimestamp)
        this.storage.delete(this.targetOf(type, obj), { gracePeriodSeconds: type.kind === "Pod" ? undefined : 0 });
    }
    this.storage.force(this.targetOf(nsType, ns), (o) => {
      o.status = { phase: "Terminating" };
      if (left === 0) o.spec = { finalizers: [] };
    });
  }

  /** After any deletion: terminating CRDs and namespaces look again at what they wait for. */
  private recheckTerminating(): void {
    for (const [resource, obj] of [...this.storage.entries()]) {
      if (!metaOf(obj).deletionTimestamp) continue;
      const type = this.typeOf(resource);
      if (!type) continue;
      if (resource === "/namespaces") this.drainNamespace(type, obj);
      else if (resource === "apiextensions.k8s.io/customresourcedefinitions") this.cleanupCrd(type, obj);
      else if ((metaOf(obj).finalizers ?? []).includes("foregroundDeletion")) this.foreground(type, obj);
    }
  }

  // ---- garbage collector ----

  private liveUids(): Set<string> {
    const uids = new Set<string>();
    for (const [, obj] of this.storage.entries()) uids.add(metaOf(obj).uid!);
    return uids;
  }

  private dependentsOf(uid: string): [ResourceType, KubeObject][] {
    const out: [ResourceType, KubeObject][] = [];
    for (const [resource, obj] of this.storage.entries()) {
      const type = this.typeOf(resource);
      if (type && (metaOf(obj).ownerReferences ?? []).some((r) => r.uid === uid)) out.push([type, obj]);
    }
    return out;
  }

  /** An owner is gone: a dependent with no owner left is deleted (background); else the dangling reference goes. */
  private collectDependents(uid: string): void {
    for (const [type, obj] of this.dependentsOf(uid)) this.collectIfOrphaned(type, obj);
  }

  private collectIfOrphaned(type: ResourceType, obj: KubeObject): void {
    const live = this.liveUids();
    const refs: OwnerReference[] = metaOf(obj).ownerReferences ?? [];
    const remaining = refs.filter((r) => live.has(r.uid));
    if (remaining.length === refs.length) return;
    const t = this.targetOf(type, obj);
    if (remaining.length === 0) {
      if (!metaOf(obj).deletionTimestamp) this.storage.delete(t, { propagationPolicy: "Background" });
      return;
    }
    this.storage.force(t, (o) => void (metaOf(o).ownerReferences = remaining));
  }

  /** Foreground deletion: the owner waits (finalizer foregroundDeletion) until its dependents are gone. */
  private foreground(type: ResourceType, owner: KubeObject): void {
    const uid = metaOf(owner).uid!;
    const dependents = this.dependentsOf(uid);
    for (const [t, obj] of dependents)
      if (!metaOf(obj).deletionTimestamp) this.storage.delete(this.targetOf(t, obj), { propagationPolicy: "Foreground" });
    if (dependents.length === 0) {
      this.storage.force(
        this.targetOf(type, owner),
        (o) => void (metaOf(o).finalizers = (metaOf(o).finalizers ?? []).filter((f) => f !== "foregroundDeletion")),
      );
    }
  }

  /** Orphan propagation: the dependents lose their reference to the owner before it goes. */
  orphan(owner: KubeObject): void {
    const uid = metaOf(owner).uid!;
    for (const [type, obj] of this.dependentsOf(uid)) {
      this.storage.force(
        this.targetOf(type, obj),
        (o) => void (metaOf(o).ownerReferences = (metaOf(o).ownerReferences ?? []).filter((r) => r.uid !== uid)),
      );
    }
  }
}
