// Informers over the Kubernetes API: client-node's ListWatch (list, then watch from the list's
// resourceVersion) for our kinds, Secrets and Namespaces, made to survive what a long-running
// controller meets:
//   - a dropped watch: ListWatch reconnects from the last resourceVersion it saw (nothing missed);
//   - 410 Gone (the watch history was compacted): ListWatch clears its resourceVersion and lists
//     again, once, calling delete for what vanished and update for what changed, so the handlers
//     here see every change; `onRelist` then lets a reconciler resync (its list diff);
//   - any other error (the API server down, a 5xx): ListWatch stops and reports it; we start it
//     again with a capped, jittered backoff, from the resourceVersion it had.
import {
  makeInformer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type Informer,
  type ObjectCache,
} from "@kubernetes/client-node";
import type { KubeLog } from "./reconcile-log.js";

export type ChangeVerb = "add" | "update" | "delete";

/** One watched collection: its watch path and the list call of the same objects. */
export interface WatchSource<T extends KubernetesObject> {
  path: string;
  list: () => Promise<KubernetesListObject<T>>;
}

export interface InformerSpec<T extends KubernetesObject> {
  /** For logs: `flowhandlers`, `secrets`... */
  name: string;
  /** One source for all namespaces, or one per watched namespace. */
  sources: ReadonlyArray<WatchSource<T>>;
  labelSelector?: string;
  onChange: (verb: ChangeVerb, obj: T) => void;
  /** After every complete list (the first and each after a 410): the cache is whole again. */
  onRelist?: () => void;
}

/** The objects a set of informers holds, and when they first held everything. */
export interface WatchedObjects<T extends KubernetesObject> {
  list(): T[];
  get(namespace: string, name: string): T | undefined;
  /** Resolves once every source has listed once. */
  synced: Promise<void>;
  /** How many complete lists were made (1 per source at start, +1 per 410 or restart). */
  lists(): number;
  stop(): Promise<void>;
}

const MAX_BACKOFF_MS = 10_000;

const restartWithBackoff = (informer: Informer<KubernetesObject>, spec: { name: string; log: KubeLog; stopped: () => boolean }): void => {
  let attempt = 0;
  informer.on("connect", () => void (attempt = 0));
  informer.on("error", (err: unknown) => {
    if (spec.stopped()) return;
    attempt++;
    const delay = Math.min(MAX_BACKOFF_MS, 200 * 2 ** Math.min(attempt, 6)) * (0.5 + Math.random() / 2);
    spec.log.warn({ err, informer: spec.name, retryInMs: Math.round(delay) }, "watch failed; starting it again");
    setTimeout(() => {
      if (!spec.stopped()) informer.start().catch(() => undefined);
    }, delay).unref();
  });
};

/** Starts informers over every source of `spec`; the answer reads their caches. */
export const startInformers = <T extends KubernetesObject>(kc: KubeConfig, spec: InformerSpec<T>, log: KubeLog): WatchedObjects<T> => {
  let stopped = false;
  let lists = 0;
  const caches: Array<Informer<T> & ObjectCache<T>> = [];
  const firstLists = spec.sources.map((source) => {
    let listed!: () => void;
    const first = new Promise<void>((resolve) => (listed = resolve));
    const list = async (): Promise<KubernetesListObject<T>> => {
      const answer = await source.list();
      // ListWatch applies the list (deletes, adds, updates) right after this promise settles.
      setImmediate(() => {
        lists++;
        listed();
        if (!stopped) spec.onRelist?.();
      });
      return answer;
    };
    const informer = makeInformer<T>(kc, source.path, list, spec.labelSelector);
    for (const verb of ["add", "update", "delete"] as const) informer.on(verb, (obj: T) => spec.onChange(verb, obj));
    restartWithBackoff(informer, { name: spec.name, log, stopped: () => stopped });
    caches.push(informer);
    informer.start().catch((err: unknown) => log.warn({ err, informer: spec.name }, "watch did not start"));
    return first;
  });
  return {
    list: () => caches.flatMap((c) => c.list()),
    get: (namespace, name) => {
      for (const c of caches) {
        const o = c.get(name, namespace);
        if (o) return o;
      }
      return undefined;
    },
    synced: Promise.all(firstLists).then(() => undefined),
    lists: () => lists,
    stop: async () => {
      stopped = true;
      await Promise.all(caches.map((c) => c.stop()));
    },
  };
};
