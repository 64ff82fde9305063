// The reconcile loop every configuration kind shares (FlowHandler, FlowEventHook, FlowSecret):
// an informer, a per-key queue, and for each key one level-based pass:
//   - the CR exists: its spec is checked with core's rules and written to Postgres through the
//     Postgres ResourceStore (a no-op when Postgres already says the same), then its status is
//     written when it changed: observedGeneration, Ready (True/Reconciled, or False with the reason
//     and the message that say what is wrong: InvalidSpec, SecretNotFound), and the kind's fields;
//   - the CR is gone: the resource is removed from Postgres.
// Deletions missed while the controller was down are found by a list diff after every complete
// list (start, and each relist after a 410): a Postgres resource of a watched namespace's project
// with no CR, written before that list began, is removed (docs/internals.md "Reconcilers" says why
// a list diff and not a finalizer).
import type { KubernetesObject } from "@kubernetes/client-node";
import { FlowError, assertStorableJson, type ResourceScope } from "@flowsvc/core";
import { listProjects, type ProjectRef } from "@flowsvc/store";
import type { Pool } from "pg";
import { ZodError } from "zod";
import { startInformers, type WatchedObjects } from "./informers.js";
import type { KubeLog } from "./reconcile-log.js";
import type { FlowApi } from "./reconcile-api.js";
import type { NamespaceIndex } from "./reconcile-namespaces.js";
import { ReconcileQueue } from "./reconcile-queue.js";
import { flowNameOf } from "./reconcile-names.js";
import { canonicalJson } from "./flowrun-summary.js";
import { FLOW_KINDS, kubeTime, type Condition, type FlowKindName, type FlowObject } from "./reconcile-kinds.js";
import type { KubeConfig } from "@kubernetes/client-node";

/**
 * What a pass concluded: Ready, or not with a reason; plus the kind's own status fields (null
 * removes one). `transient`: the pass could not tell (a Secret it could not read): Ready is
 * Unknown, nothing was withdrawn, and the key is retried with the queue's backoff.
 */
export type Outcome =
  | { ready: true; fields?: Record<string, unknown> }
  | { ready: false; reason: string; message: string; fields?: Record<string, unknown>; transient?: true };

/** Thrown after the status of a transient Outcome is written, so that the queue retries the key. */
class RetryLater extends Error {}

export interface ConfigKind<O extends FlowObject> {
  kind: FlowKindName;
  /** Makes Postgres say what the CR says. Throws a FlowError or ZodError for a spec that breaks a rule. */
  apply(obj: O, scope: ResourceScope, name: string): Promise<Outcome>;
  /** Removes the resource from Postgres (false when it was not there). */
  remove(scope: ResourceScope, name: string): Promise<boolean>;
  /** The resources of a project in Postgres and when each was last written, for the list diff. */
  stored(projectId: string): Promise<Array<{ name: string; writtenAt: Date }>>;
}

export interface ConfigDeps {
  kc: KubeConfig;
  pool: Pool;
  api: FlowApi;
  log: KubeLog;
  namespaces: NamespaceIndex;
  watchNamespaces: readonly string[];
  /** Every CR is reconciled again this often (a level-based safety net; a pass that finds nothing to change writes nothing). Default 10 min. */
  resyncMs?: number;
}

export interface ConfigReconciler<O extends FlowObject> {
  objects: WatchedObjects<O>;
  queue: ReconcileQueue;
  /** Re-reconciles every CR of the kind (a referenced Secret changed, a namespace appeared). */
  requeue(filter?: (o: O) => boolean): void;
  stop(): Promise<void>;
}

/** Allows writes a little older than the list, for clock skew between the controller and Postgres. */
const DIFF_MARGIN_MS = 2_000;

/** The message of a refused spec: zod's issues with their paths, or a FlowError's sentence. */
export const specProblem = (err: unknown): string | undefined => {
  if (err instanceof ZodError) return err.issues.map((i) => `${["spec", ...i.path].join(".")}: ${i.message}`).join("; ");
  if (err instanceof FlowError && err.code === "invalid_argument") return err.message;
  return undefined;
};

/** Older first: by creationTimestamp (a string or a Date, as the client gave it), then by name. */
const byAge = (a: FlowObject, b: FlowObject): number => {
  const time = (o: FlowObject): number => new Date(o.metadata?.creationTimestamp ?? 0).getTime() || 0;
  const [ta, tb] = [time(a), time(b)];
  if (ta !== tb) return ta - tb;
  const [na, nb] = [a.metadata!.name!, b.metadata!.name!];
  return na < nb ? -1 : na > nb ? 1 : 0;
};

const scopeOf = (p: ProjectRef): ResourceScope => ({ org: p.org, project: p.project, orgId: p.orgId, projectId: p.projectId });

/** The Ready condition, keeping its transition time while its status stays. */
const readyCondition = (outcome: Outcome, previous: Condition | undefined, generation: number | undefined): Condition => {
  const status = outcome.ready ? "True" : outcome.transient ? "Unknown" : "False";
  return {
    type: "Ready",
    status,
    reason: outcome.ready ? "Reconciled" : outcome.reason,
    message: outcome.ready ? "in effect" : outcome.message.slice(0, 32_000),
    lastTransitionTime: previous?.status === status ? previous.lastTransitionTime : kubeTime(new Date()),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
};

type StatusOf = { observedGeneration?: number; conditions?: Condition[] } & Record<string, unknown>;

const sameStatus = (a: StatusOf | undefined, b: StatusOf): boolean => {
  // A field set to null (removed by the merge patch) is the same as one that is absent.
  const strip = (s: StatusOf) => ({
    ...Object.fromEntries(Object.entries(s).filter(([, v]) => v !== null)),
    conditions: s.conditions?.map(({ lastTransitionTime: _t, ...c }) => c),
  });
  return a !== undefined && canonicalJson(strip({ ...b, ...pick(a, b) })) === canonicalJson(strip(b));
};
/** The fields of `a` that `b` has: a status may carry fields another writer added; only ours are compared. */
const pick = (a: StatusOf, b: StatusOf): StatusOf => Object.fromEntries(Object.keys(b).map((k) => [k, a[k]]));

export const startConfigReconciler = <O extends FlowObject<unknown, StatusOf>>(deps: ConfigDeps, k: ConfigKind<O>): ConfigReconciler<O> => {
  const lastName = new Map<string, { namespace: string; name: string }>();
  const work = async (key: string): Promise<void> => {
    const [namespace, objectName] = key.split("/") as [string, string];
    await deps.namespaces.ready();
    const obj = objects.get(namespace, objectName);
    const scope = scopeOf(await deps.namespaces.project(namespace));
    if (!obj) {
      const gone = lastName.get(key);
      lastName.delete(key);
      if (gone) await release(scope, key, gone.name);
      return;
    }
    const name = flowNameOf(k.kind, obj);
    const before = lastName.get(key);
    // A CR whose annotated name changed: the old resource goes (or passes to the next CR naming it).
    if (before && before.name !== name) await release(scope, key, before.name);
    lastName.set(key, { namespace, name });
    // Two CRs naming one resource: the older holds it, the other waits (its spec is not written).
    const holder = namers(namespace, name, key).find((o) => byAge(o, obj) < 0);
    if (holder) {
      const message = `${name} is ${FLOW_KINDS[k.kind].kind} ${holder.metadata!.name}'s (the older CR naming it in this namespace): give this one another name`;
      return writeStatus(obj, { ready: false, reason: "NameTaken", message });
    }
    let outcome: Outcome;
    try {
      // What Postgres cannot store (NUL, a lone surrogate, a non-finite number) is a refused spec, not a write that fails on every retry.
      assertStorableJson(obj.spec ?? {}, "spec");
      outcome = await k.apply(obj, scope, name);
    } catch (err) {
      const problem = specProblem(err);
      if (problem === undefined) throw err;
      outcome = { ready: false, reason: "InvalidSpec", message: problem };
    }
    await writeStatus(obj, outcome);
    if (!outcome.ready && outcome.transient) throw new RetryLater(`${k.kind} ${key}: ${outcome.message}`);
  };
  /** The CRs of `namespace` but `key` that name `name`, oldest first. */
  const namers = (namespace: string, name: string, key: string): O[] =>
    objects
      .list()
      .filter((o) => o.metadata!.namespace === namespace && `${namespace}/${o.metadata!.name}` !== key && flowNameOf(k.kind, o) === name)
      .sort(byAge);
  /** `key` no longer names `name`: the resource goes, or, when another CR names it, that CR writes its own. */
  const release = async (scope: ResourceScope, key: string, name: string): Promise<void> => {
    const [namespace] = key.split("/") as [string];
    const next = namers(namespace, name, key);
    if (next.length > 0) {
      for (const o of next) queue.add(`${namespace}/${o.metadata!.name}`);
      return;
    }
    if (await k.remove(scope, name)) deps.log.info({ kind: k.kind, key, name }, "resource removed with its CR");
  };
  const writeStatus = async (obj: O, outcome: Outcome): Promise<void> => {
    const generation = obj.metadata?.generation;
    const previous = obj.status?.conditions?.find((c) => c.type === "Ready");
    const status: StatusOf = {
      ...(outcome.fields ?? {}),
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
      conditions: [readyCondition(outcome, previous, generation)],
    };
    if (sameStatus(obj.status, status)) return;
    await deps.api.patchStatus(k.kind, obj.metadata!.namespace!, obj.metadata!.name!, status);
  };
  const queue = new ReconcileQueue(work, deps.log, { name: k.kind });
  let stopped = false;
  let listStartedAt = new Date();
  const objects: WatchedObjects<O> = startInformers<O>(
    deps.kc,
    {
      name: k.kind,
      sources: deps.api.sources<O>(k.kind, deps.watchNamespaces),
      onChange: (verb, obj: KubernetesObject) => {
        const key = `${obj.metadata?.namespace}/${obj.metadata?.name}`;
        if (verb === "delete" && !lastName.has(key))
          lastName.set(key, { namespace: obj.metadata!.namespace!, name: flowNameOf(k.kind, obj) });
        queue.add(key);
      },
      onRelist: () => void listDiff(listStartedAt).finally(() => (listStartedAt = new Date())),
    },
    deps.log,
  );
  let again: NodeJS.Timeout | undefined;
  // A resource written within the margin before the list may have its CR still on its way (the API
  // writes Postgres, then the CR): it is looked at again once the margin has passed, against the
  // cache as it is then (the watch kept it current).
  const listDiff = async (since: Date): Promise<void> => {
    try {
      await deps.namespaces.ready();
      const young = await removeOrphans(deps, k, objects, new Date(since.getTime() - DIFF_MARGIN_MS));
      if (young > 0 && !stopped) {
        clearTimeout(again);
        again = setTimeout(() => void listDiff(new Date()), DIFF_MARGIN_MS + 200);
        again.unref();
      }
    } catch (err) {
      deps.log.warn({ err, kind: k.kind }, "list diff failed; the next list retries it");
    }
  };
  const requeue = (filter?: (o: O) => boolean): void => {
    for (const o of objects.list()) if (!filter || filter(o)) queue.add(`${o.metadata!.namespace}/${o.metadata!.name}`);
  };
  const resync = setInterval(() => requeue(), deps.resyncMs ?? 600_000);
  resync.unref();
  return {
    objects,
    queue,
    requeue,
    stop: async () => {
      stopped = true;
      clearTimeout(again);
      clearInterval(resync);
      queue.stop();
      await objects.stop();
    },
  };
};

/**
 * Removes the Postgres resources of watched projects that no CR names and that were written before
 * `before`; answers how many without a CR were younger (to look at again).
 */
const removeOrphans = async <O extends FlowObject>(
  deps: ConfigDeps,
  k: ConfigKind<O>,
  objects: WatchedObjects<O>,
  before: Date,
): Promise<number> => {
  const named = new Set(objects.list().map((o) => `${o.metadata!.namespace}/${flowNameOf(k.kind, o)}`));
  let young = 0;
  for (const p of await listProjects(deps.pool)) {
    const namespace = deps.namespaces.namespaceOf(p.org, p.project);
    if (!namespace) continue;
    for (const r of await k.stored(p.projectId)) {
      if (named.has(`${namespace}/${r.name}`)) continue;
      if (r.writtenAt >= before) young++;
      else if (await k.remove(scopeOf(p), r.name))
        deps.log.info({ kind: k.kind, namespace, name: r.name }, "resource without a CR removed (list diff)");
    }
  }
  return young;
};
