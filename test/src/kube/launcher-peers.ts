// What the Pod launcher tests share: the fake API server with a FlowRun kind, the kubelet simulator
// running the agent image as `node agent-image/dist/main.js`, a real test Postgres with two keyed
// projects (namespaces team-a and team-b of org acme), and the real ingest app on 127.0.0.1 that the
// agents claim their jobs from.
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CoreV1Api, KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { pino } from "pino";
import type { FastifyInstance } from "fastify";
import {
  Keyring,
  createPgResourceStore,
  createRun,
  createTestDatabase,
  mintId,
  startListener,
  withTransaction,
  type Listener,
  type TestDatabase,
} from "@flowsvc/store";
import { buildApp } from "@flowsvc/ingest";
import { startKubelet, type Kubelet } from "./kubelet.js";
import { startFakeApiServer, type FakeApiServer } from "./server.js";
import type { SimNode } from "./scheduler.js";

export const AGENT_IMAGE = "ghcr.io/flowsvc/agent:test";
export const AGENT_SELECTOR = "app.kubernetes.io/name=flowsvc-agent,app.kubernetes.io/managed-by=flowsvc";

/** A FlowRun kind as the operator's CRD serves it, without its schema (the reconcilers own that). */
export const flowRunCrd = () => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "flowruns.flowsvc.io" },
  spec: {
    group: "flowsvc.io",
    scope: "Namespaced",
    names: { plural: "flowruns", singular: "flowrun", kind: "FlowRun", shortNames: ["fr"], categories: ["flowsvc"] },
    versions: [
      {
        name: "v1alpha1",
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
      },
    ],
  },
});

export interface Peers {
  api: FakeApiServer;
  kc: KubeConfig;
  core: CoreV1Api;
  kubelet: Kubelet;
  db: TestDatabase;
  keyring: Keyring;
  masterKey: Buffer;
  listener: Listener;
  /** team-a and team-b's project ids. */
  projects: Record<"team-a" | "team-b", string>;
  ingest: FastifyInstance;
  ingestUrl: string;
  close(): Promise<void>;
}

const agentMain = (): string => join(dirname(fileURLToPath(import.meta.resolve("@flowsvc/agent"))), "main.js");

const keyedProjects = async (db: TestDatabase, keyring: Keyring): Promise<Peers["projects"]> => {
  const orgId = mintId("org");
  await db.pool.query(`insert into orgs (id, name) values ($1, 'acme')`, [orgId]);
  await db.pool.query(`insert into org_keys (org_id, wrapped) values ($1, $2)`, [
    orgId,
    Buffer.from(await keyring.newWrappedOrgKey(orgId)),
  ]);
  const projects = { "team-a": mintId("prj"), "team-b": mintId("prj") };
  for (const [name, id] of Object.entries(projects))
    await db.pool.query(`insert into projects (id, org_id, name) values ($1, $2, $3)`, [id, orgId, name]);
  return projects;
};

export const startPeers = async (opts: { nodes?: SimNode[]; leaseMs: number }): Promise<Peers> => {
  const api = await startFakeApiServer({ namespaces: ["default", "kube-system", "team-a", "team-b"] });
  const kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  const { ApiextensionsV1Api } = await import("@kubernetes/client-node");
  await kc.makeApiClient(ApiextensionsV1Api).createCustomResourceDefinition({ body: flowRunCrd() });
  const kubelet = await startKubelet({
    kubeconfigPath: api.kubeconfigPath,
    nodes: opts.nodes ?? [{ name: "node-1" }],
    images: { [AGENT_IMAGE]: [process.execPath, agentMain()] },
  });
  const db = await createTestDatabase();
  const masterKey = randomBytes(32);
  const keyring = await Keyring.create(db.pool, masterKey);
  const projects = await keyedProjects(db, keyring);
  const listener = startListener(db.url, () => undefined);
  const ingest = buildApp(
    { pool: db.pool, keyring, listener, resources: createPgResourceStore(db.pool, keyring), publicUrl: undefined, leaseMs: opts.leaseMs },
    pino({ level: "silent" }),
  );
  const ingestUrl = await ingest.listen({ host: "127.0.0.1", port: 0 });
  return {
    api,
    kc,
    core,
    kubelet,
    db,
    keyring,
    masterKey,
    listener,
    projects,
    ingest,
    ingestUrl,
    async close() {
      await kubelet.stop();
      await ingest.close();
      await listener.close();
      await db.drop();
      await api.close();
    },
  };
};

/** A bash script run in a project, queued as a submit queues it; answers its run and job ids. */
export const submitScript = (
  peers: Peers,
  project: keyof Peers["projects"],
  source: string,
  capabilities: string[] = [],
): Promise<{ runId: string; jobId: string }> =>
  withTransaction(peers.db.pool, async (tx) => {
    const { id: runId } = await createRun(tx, {
      projectId: peers.projects[project],
      source,
      filename: "job.sh",
      trusted: true,
      trigger: { type: "manual", sender: "test" },
      capabilities,
    });
    const { rows } = await tx.query<{ id: string }>(`select id from jobs where run_id = $1`, [runId]);
    return { runId, jobId: rows[0]!.id };
  });

export const jobRow = async (peers: Peers, jobId: string): Promise<{ status: string; attempt: number }> =>
  (await peers.db.pool.query<{ status: string; attempt: number }>(`select status, attempt from jobs where id = $1`, [jobId])).rows[0]!;

export const runStatus = async (peers: Peers, runId: string): Promise<string> =>
  (await peers.db.pool.query<{ status: string }>(`select status from runs where id = $1`, [runId])).rows[0]!.status;

/** The agent Pods of a job in a namespace, as the API server has them now. */
export const podsOf = async (peers: Peers, namespace: string, jobId: string): Promise<V1Pod[]> =>
  (await peers.core.listNamespacedPod({ namespace, labelSelector: `${AGENT_SELECTOR},flowsvc.io/job-id=${jobId}` })).items;

export interface LogLine {
  level: "info" | "warn" | "error";
  obj: Record<string, unknown>;
  msg: string;
}

/** A levelled logger that keeps its lines (the controller's pino, for a test). */
export const recordingLogger = (): { lines: LogLine[]; info: Log; warn: Log; error: Log } => {
  const lines: LogLine[] = [];
  const at =
    (level: LogLine["level"]): Log =>
    (obj, msg) =>
      void lines.push({ level, obj, msg });
  return { lines, info: at("info"), warn: at("warn"), error: at("error") };
};
type Log = (obj: Record<string, unknown>, msg: string) => void;
