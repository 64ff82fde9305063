// The reconcilers of kubernetes mode (issue 16 items 2-4; docs/internals.md "Reconcilers"): the
// informers over our kinds, Secrets and Namespaces, one per-key queue per kind syncing each CR
// into Postgres and writing its status back, and the FlowRun mirror (Postgres -> FlowRun) that is
// also the launcher's RunOwners. controller/src/main.ts starts them when this replica leads.
import type { Pool } from "pg";
import type { KubeConfig, V1Namespace } from "@kubernetes/client-node";
import type { Keyring, Listener } from "@flowsvc/store";
import { startInformers, type WatchedObjects } from "./informers.js";
import type { KubeLog } from "./reconcile-log.js";
import { FlowApi } from "./reconcile-api.js";
import { NamespaceIndex } from "./reconcile-namespaces.js";
import { FlowRunMirror } from "./flowrun-mirror.js";
import type { FlowRunObject } from "./flowrun-owners.js";
import type { RunOwners } from "./run-owners.js";

export interface ReconcilerDeps {
  kc: KubeConfig;
  pool: Pool;
  keyring: Keyring;
  listener: Listener;
  log: KubeLog;
  /** FLOWSVC_PUBLIC_URL: a hook's ingest URL in its status. */
  publicUrl: string | undefined;
  /** [] watches all namespaces. */
  watchNamespaces: readonly string[];
  runTtlSecondsAfterFinished: number;
  /** The FlowRun mirror's tick (default 1000 ms). */
  mirrorPollMs?: number;
}

export interface Reconcilers {
  /** For the Pod launcher: a run's FlowRun, created when missing. */
  runOwners: RunOwners;
  /** Resolves when every informer has listed once and the first resync ran. */
  synced: Promise<void>;
  stop(): Promise<void>;
}

const startNamespaces = (deps: ReconcilerDeps, api: FlowApi): WatchedObjects<V1Namespace> =>
  startInformers<V1Namespace>(deps.kc, { name: "namespaces", sources: [api.namespaceSource()], onChange: () => undefined }, deps.log);

export const startReconcilers = (deps: ReconcilerDeps): Reconcilers => {
  const api = new FlowApi(deps.kc);
  const nsObjects = startNamespaces(deps, api);
  const namespaces = new NamespaceIndex(nsObjects, deps);
  const mirrorRef: { mirror?: FlowRunMirror } = {};
  const flowRuns = startInformers<FlowRunObject>(
    deps.kc,
    { name: "flowruns", sources: api.sources<FlowRunObject>("run", deps.watchNamespaces), onChange: () => mirrorRef.mirror?.nudge() },
    deps.log,
  );
  const mirror = new FlowRunMirror({
    pool: deps.pool,
    api,
    log: deps.log,
    flowRuns,
    namespaces,
    ttlSeconds: deps.runTtlSecondsAfterFinished,
    ...(deps.mirrorPollMs !== undefined ? { pollMs: deps.mirrorPollMs } : {}),
  });
  mirrorRef.mirror = mirror;
  const unsubscribe = [
    deps.listener.on("flowsvc_jobs", () => mirror.nudge()),
    deps.listener.on("flowsvc_runs", () => mirror.nudge()),
    deps.listener.onReconnect(() => mirror.nudge()),
  ];
  const synced = Promise.all([nsObjects.synced, flowRuns.synced]).then(() => mirror.start());
  return {
    runOwners: mirror.owners,
    synced,
    stop: async () => {
      for (const u of unsubscribe) u();
      mirror.stop();
      await Promise.all([nsObjects.stop(), flowRuns.stop()]);
    },
  };
};
