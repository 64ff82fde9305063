// The reconcilers of kubernetes mode (issue 16 items 2-4; docs/internals.md "Reconcilers"): the
// informers over our kinds, Secrets and Namespaces; one per-key queue per configuration kind
// syncing each CR into Postgres (through the Postgres ResourceStore) and writing its status back;
// the FlowRun submitter (kubectl-applied FlowRuns) and the FlowRun mirror (Postgres -> FlowRun),
// which is also the launcher's RunOwners. controller/src/main.ts starts them when this replica leads.
import type { Pool } from "pg";
import type { KubeConfig, V1Namespace, V1Secret } from "@kubernetes/client-node";
import type { ResourceStore } from "@flowsvc/core";
import type { Keyring, Listener } from "@flowsvc/store";
import { startInformers, type WatchedObjects } from "./informers.js";
import type { KubeLog } from "./reconcile-log.js";
import { FlowApi } from "./reconcile-api.js";
import { NamespaceIndex } from "./reconcile-namespaces.js";
import { FlowRunMirror } from "./flowrun-mirror.js";
import type { FlowRunObject } from "./flowrun-owners.js";
import { isSubmission, submitFlowRun } from "./flowrun-submit.js";
import type { RunOwners } from "./run-owners.js";
import { startConfigReconciler, type ConfigDeps, type ConfigReconciler } from "./reconcile-config.js";
import { handlerKind } from "./reconcile-handler.js";
import { secretKind } from "./reconcile-secret.js";
import { hookKind } from "./reconcile-hook.js";
import { credentialKind } from "./reconcile-credential.js";
import { graphKind } from "./reconcile-graph.js";
import { SecretRefs, referencedSecrets } from "./reconcile-secret-refs.js";
import { ReconcileQueue } from "./reconcile-queue.js";
import type { FlowObject } from "./reconcile-kinds.js";

export interface ReconcilerDeps {
  kc: KubeConfig;
  pool: Pool;
  keyring: Keyring;
  listener: Listener;
  /** The Postgres ResourceStore (store's createPgResourceStore): every CR reaches Postgres through it. */
  store: ResourceStore;
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
  /** Resolves when every informer has listed once. */
  synced: Promise<void>;
  /** Resolves when no reconcile waits or runs (tests and benchmarks). */
  idle(): Promise<void>;
  /** How many complete lists the informers made (a relist after a 410 adds one per informer). */
  lists(): number;
  stop(): Promise<void>;
}

type Config = Array<ConfigReconciler<FlowObject<unknown, Record<string, unknown>>>>;

/** FlowSecrets, FlowEventHooks and FlowCredentials that point at a Secret are reconciled again when it changes. */
const onSecretChange = (config: Config) => (_verb: string, s: V1Secret) => {
  const namespace = s.metadata?.namespace;
  const name = s.metadata?.name;
  for (const r of config) r.requeue((o) => o.metadata?.namespace === namespace && referencedSecrets(o.spec).includes(name ?? ""));
};

const startFlowRuns = (deps: ReconcilerDeps, base: ConfigDeps) => {
  const ref: { mirror?: FlowRunMirror; submit?: ReconcileQueue } = {};
  const flowRuns: WatchedObjects<FlowRunObject> = startInformers<FlowRunObject>(
    deps.kc,
    {
      name: "flowruns",
      sources: base.api.sources<FlowRunObject>("run", deps.watchNamespaces),
      onChange: (verb, o) => {
        if (verb !== "delete" && isSubmission(o)) ref.submit?.add(`${o.metadata!.namespace}/${o.metadata!.name}`);
        ref.mirror?.nudge();
      },
    },
    deps.log,
  );
  const submitDeps = { pool: deps.pool, api: base.api, log: deps.log, namespaces: base.namespaces };
  ref.submit = new ReconcileQueue(
    async (key) => {
      const [namespace, name] = key.split("/") as [string, string];
      const o = flowRuns.get(namespace, name);
      if (o && isSubmission(o) && (await submitFlowRun(submitDeps, o))) ref.mirror?.nudge();
    },
    deps.log,
    { name: "flowrun-submit" },
  );
  ref.mirror = new FlowRunMirror({
    pool: deps.pool,
    api: base.api,
    log: deps.log,
    flowRuns,
    namespaces: base.namespaces,
    ttlSeconds: deps.runTtlSecondsAfterFinished,
    ...(deps.mirrorPollMs !== undefined ? { pollMs: deps.mirrorPollMs } : {}),
  });
  return { flowRuns, mirror: ref.mirror, submit: ref.submit };
};

export const startReconcilers = (deps: ReconcilerDeps): Reconcilers => {
  const api = new FlowApi(deps.kc);
  const nsObjects: WatchedObjects<V1Namespace> = startInformers<V1Namespace>(
    deps.kc,
    { name: "namespaces", sources: [api.namespaceSource()], onChange: () => undefined },
    deps.log,
  );
  const namespaces = new NamespaceIndex(nsObjects, deps);
  const base: ConfigDeps = { kc: deps.kc, pool: deps.pool, api, log: deps.log, namespaces, watchNamespaces: deps.watchNamespaces };
  const holder: { secrets?: WatchedObjects<V1Secret> } = {};
  const refs = new SecretRefs(
    () => holder.secrets!,
    (namespace, name) => api.readSecret(namespace, name),
  );
  const config = [
    startConfigReconciler(base, handlerKind(deps.pool, deps.store)),
    startConfigReconciler(base, secretKind({ pool: deps.pool, keyring: deps.keyring, store: deps.store, refs })),
    startConfigReconciler(base, hookKind({ pool: deps.pool, keyring: deps.keyring, store: deps.store, refs, publicUrl: deps.publicUrl })),
    startConfigReconciler(base, credentialKind({ pool: deps.pool, keyring: deps.keyring, store: deps.store, refs })),
    startConfigReconciler(base, graphKind(deps.pool)),
  ] as unknown as Config;
  holder.secrets = startInformers<V1Secret>(
    deps.kc,
    { name: "secrets", sources: api.secretSources(deps.watchNamespaces), onChange: onSecretChange(config) },
    deps.log,
  );
  const runs = startFlowRuns(deps, base);
  const unsubscribe = [
    deps.listener.on("flowsvc_jobs", () => runs.mirror.nudge()),
    deps.listener.on("flowsvc_runs", () => runs.mirror.nudge()),
    deps.listener.onReconnect(() => runs.mirror.nudge()),
  ];
  const informers = [nsObjects, holder.secrets, runs.flowRuns, ...config.map((c) => c.objects)] as Array<WatchedObjects<never>>;
  const synced = Promise.all(informers.map((i) => i.synced)).then(() => runs.mirror.start());
  return {
    runOwners: runs.mirror.owners,
    synced,
    idle: async () => {
      await Promise.all([...config.map((c) => c.queue.idle()), runs.submit.idle()]);
    },
    lists: () => informers.reduce((n, i) => n + i.lists(), 0),
    stop: async () => {
      for (const u of unsubscribe) u();
      runs.mirror.stop();
      runs.submit.stop();
      for (const c of config) c.queue.stop();
      await Promise.all(informers.map((i) => i.stop()));
    },
  };
};
