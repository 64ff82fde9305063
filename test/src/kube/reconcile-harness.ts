// What the reconcile and operator tests share: the fake API server with the flowsvc CRDs applied
// (crds/ when it exists, else a minimal schema-less stand-in for each kind), a real test database,
// a keyring, a LISTEN connection, and the real reconcilers (controller/src/kube) driven by the real
// @kubernetes/client-node.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import pino from "pino";
import { CoreV1Api, CustomObjectsApi, KubeConfig, loadAllYaml } from "@kubernetes/client-node";
import { SCRIPT_WORKFLOW, trustOf, type ResourceStore } from "@flowsvc/core";
import {
  Keyring,
  createPgResourceStore,
  createRun,
  createTestDatabase,
  startListener,
  withTransaction,
  type Listener,
  type TestDatabase,
} from "@flowsvc/store";
import { startReconcilers, type Reconcilers } from "@flowsvc/controller/kube";
import { startFakeApiServer, type FakeApiServer } from "./server.js";
import { REPO_ROOT } from "../support/server.js";

export const GROUP = "flowsvc.io";
export const VERSION = "v1alpha1";

const KINDS = [
  { kind: "FlowHandler", plural: "flowhandlers", short: "fh" },
  { kind: "FlowEventHook", plural: "floweventhooks", short: "feh" },
  { kind: "FlowSecret", plural: "flowsecrets", short: "fsec" },
  { kind: "FlowCredential", plural: "flowcredentials", short: "fcred" },
  { kind: "FlowGraph", plural: "flowgraphs", short: "fg" },
  { kind: "FlowRun", plural: "flowruns", short: "fr" },
];

const standIn = (k: (typeof KINDS)[number]) => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: `${k.plural}.${GROUP}` },
  spec: {
    group: GROUP,
    scope: "Namespaced",
    names: { plural: k.plural, singular: k.kind.toLowerCase(), kind: k.kind, shortNames: [k.short], categories: ["flowsvc"] },
    versions: [
      {
        name: VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
              status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
            },
          },
        },
      },
    ],
  },
});

/** The CRDs: the generated ones in crds/ when they exist, else the stand-ins. */
export const flowCrds = (): object[] => {
  const dir = join(REPO_ROOT, "crds");
  if (!existsSync(dir)) return KINDS.map(standIn);
  return readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .flatMap((f) => loadAllYaml(readFileSync(join(dir, f), "utf8")) as object[])
    .filter((d) => (d as { kind?: string }).kind === "CustomResourceDefinition");
};

export interface Harness {
  api: FakeApiServer;
  kc: KubeConfig;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  db: TestDatabase;
  keyring: Keyring;
  listener: Listener;
  pgStore: ResourceStore;
  reconcilers: Reconcilers;
  masterKey: Buffer;
  /** Starts the reconcilers again (after stopReconcilers: a controller restart). */
  restart(): Promise<void>;
  stopReconcilers(): Promise<void>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  namespaces?: Array<{ name: string; org?: string }>;
  ttlSeconds?: number;
  publicUrl?: string;
  /** An API server to reuse (the operator test starts its own with the kubelet). */
  api?: FakeApiServer;
  databaseUrl?: string;
}

export const applyCrds = async (custom: CustomObjectsApi): Promise<void> => {
  for (const body of flowCrds())
    await custom.createClusterCustomObject({ group: "apiextensions.k8s.io", version: "v1", plural: "customresourcedefinitions", body });
};

export const startHarness = async (opts: HarnessOptions = {}): Promise<Harness> => {
  const api = opts.api ?? (await startFakeApiServer());
  const kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  if (!opts.api) await applyCrds(custom);
  for (const ns of opts.namespaces ?? [])
    await core.createNamespace({ body: { metadata: { name: ns.name, ...(ns.org ? { labels: { "flowsvc.io/org": ns.org } } : {}) } } });
  const db = await createTestDatabase();
  const masterKey = randomBytes(32);
  const keyring = await Keyring.create(db.pool, masterKey);
  const listener = startListener(db.url, () => undefined);
  const pgStore = createPgResourceStore(db.pool, keyring);
  const log = pino({ level: process.env["FLOWSVC_TEST_LOG"] ?? "silent" });
  const start = (): Reconcilers =>
    startReconcilers({
      kc,
      pool: db.pool,
      keyring,
      listener,
      store: pgStore,
      log,
      publicUrl: opts.publicUrl,
      watchNamespaces: [],
      runTtlSecondsAfterFinished: opts.ttlSeconds ?? 3600,
      mirrorPollMs: 100,
    });
  const h: Harness = {
    api,
    kc,
    custom,
    core,
    db,
    keyring,
    listener,
    pgStore,
    masterKey,
    reconcilers: start(),
    restart: async () => {
      h.reconcilers = start();
      await h.reconcilers.synced;
    },
    stopReconcilers: () => h.reconcilers.stop(),
    close: async () => {
      await h.reconcilers.stop();
      await listener.close();
      await db.drop();
      if (!opts.api) await api.close();
    },
  };
  await h.reconcilers.synced;
  return h;
};

export interface TestCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

/** One of our custom objects as a test reads it. */
export interface Cr {
  metadata: { name: string; uid: string; generation?: number; annotations?: Record<string, string>; ownerReferences?: unknown[] };
  spec?: Record<string, unknown>;
  status?: {
    observedGeneration?: number;
    conditions?: TestCondition[];
    setAt?: string;
    url?: string;
    runId?: string;
    status?: string;
    substate?: string;
    summary?: string;
  };
}

/** The CR of a kind by name, or undefined. */
export const getCr = async (h: Pick<Harness, "custom">, plural: string, namespace: string, name: string): Promise<Cr | undefined> => {
  try {
    return (await h.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, plural, namespace, name })) as Cr;
  } catch {
    return undefined;
  }
};

export const readyOf = (cr: Cr | undefined): TestCondition | undefined => cr?.status?.conditions?.find((c) => c.type === "Ready");

/** A queued script run in the project, made as a person's submit makes one: its id. */
export const scriptRun = async (harness: Harness, projectId: string): Promise<string> =>
  withTransaction(
    harness.db.pool,
    async (tx) =>
      (
        await createRun(tx, {
          projectId,
          workflow: SCRIPT_WORKFLOW,
          source: "echo hi\n",
          filename: "r.sh",
          interpreter: ["bash"],
          env: {},
          tags: [],
          trigger: { type: "manual" },
          idempotencyKey: null,
          createdBy: null,
          retry: null,
          trusted: trustOf({ by: "person" }),
        })
      ).id,
  );
