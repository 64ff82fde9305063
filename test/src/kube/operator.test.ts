// The operator end to end (issue 16): the fake API server with the flowsvc CRDs, the kubelet
// simulator running agent Pods as local processes, a real Postgres, the real flowsvc-ingest and
// flowsvc-controller bins, the real kubectl and the real `flow` CLI.
//   kubectl apply -f a handler (and a FlowSecret fed by a Kubernetes Secret) -> flow emit -> a
//   FlowRun appears -> a Pod runs the agent -> the FlowRun reaches Succeeded -> the Pod goes -> after
//   the TTL the FlowRun goes while `flow status` still shows the run. Along the way: the secret is
//   masked in the log, a rotated Secret reaches the next run, the controller survives a dropped
//   watch and a 410, and no object `kubectl get -o yaml` shows holds a secret value. Ingest answers
//   /metrics on its metrics port only (FLOWSVC_METRICS_PORT), counting what its app served.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { createTestDatabase, mintId, mintToken, type TestDatabase } from "@flowsvc/store";
import { startFakeApiServer, type FakeApiServer } from "./server.js";
import { startKubelet, type Kubelet } from "./kubelet.js";
import { applyCrds, getCr, readyOf, type Cr } from "./reconcile-harness.js";
import { REPO_ROOT, runFlow } from "../support/server.js";
import { waitFor } from "../support/wait.js";
import { CustomObjectsApi, CoreV1Api, KubeConfig } from "@kubernetes/client-node";

const NS = "shop";
const IMAGE = "ghcr.io/flowsvc/agent:e2e";
const FIRST = `first-${randomBytes(8).toString("hex")}`;
const SECOND = `second-${randomBytes(8).toString("hex")}`;

let api: FakeApiServer;
let kubelet: Kubelet;
let db: TestDatabase;
let custom: CustomObjectsApi;
let core: CoreV1Api;
let dir: string;
let token: string;
let ingestUrl: string;
let metricsUrl: string;
const procs: ChildProcess[] = [];

const agentMain = (): string => join(dirname(fileURLToPath(import.meta.resolve("@flowsvc/agent"))), "main.js");

const kubectl = (args: string[], stdin = ""): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve, reject) => {
    const child = spawn("kubectl", ["--kubeconfig", api.kubeconfigPath, "--cache-dir", join(dir, "cache"), ...args]);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });

/** Starts a bin; resolves with its stderr so far once `ready` matches it. */
const startBin = (bin: string, env: Record<string, string>, ready: RegExp): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(REPO_ROOT, bin)], { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] });
    procs.push(child);
    let err = "";
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
      if (ready.test(err)) resolve(err);
    });
    child.once("exit", (code) => reject(new Error(`${bin} exited with ${code}:\n${err}`)));
  });

const flow = (args: string[]) =>
  runFlow(args, { FLOWSVC_URL: ingestUrl, FLOWSVC_TOKEN: token, FLOWSVC_PROJECT: `default/${NS}`, FLOWSVC_CONFIG: join(dir, "cli.json") });

const manifests = (secretValue: string) => `
apiVersion: v1
kind: Secret
metadata: {name: shop-creds, namespace: ${NS}}
stringData: {token: "${secretValue}"}
---
apiVersion: flowsvc.io/v1alpha1
kind: FlowSecret
metadata: {name: api-token, namespace: ${NS}}
spec:
  valueFrom: {secretKeyRef: {name: shop-creds, key: token}}
---
apiVersion: flowsvc.io/v1alpha1
kind: FlowHandler
metadata: {name: on-order, namespace: ${NS}}
spec:
  events: [order.*]
  reaction:
    kind: script
    filename: order.sh
    source: |
      echo "token=$API_TOKEN"
      printf %s "$API_TOKEN" | sha256sum
`;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "operator-e2e-"));
  api = await startFakeApiServer({ namespaces: ["default", "kube-system", NS] });
  const kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  custom = kc.makeApiClient(CustomObjectsApi);
  core = kc.makeApiClient(CoreV1Api);
  await applyCrds(custom);
  kubelet = await startKubelet({ kubeconfigPath: api.kubeconfigPath, images: { [IMAGE]: [process.execPath, agentMain()] } });
  db = await createTestDatabase();
  // A person with an API token: the project the controller makes for the namespace makes them its admin.
  const minted = mintToken("flw");
  token = minted.token;
  const userId = mintId("usr");
  await db.pool.query(`insert into users (id, name) values ($1, 'admin')`, [userId]);
  await db.pool.query(`insert into api_tokens (id, user_id, digest, label) values ($1, $2, $3, 'e2e')`, [
    mintId("tok"),
    userId,
    minted.digest,
  ]);
  const masterKey = randomBytes(32).toString("base64");
  const common = { FLOWSVC_DATABASE_URL: db.url, FLOWSVC_MASTER_KEY: masterKey, KUBECONFIG: api.kubeconfigPath, FLOWSVC_LOG_LEVEL: "info" };
  const ingestLog = await startBin(
    "ingest/dist/main.js",
    { ...common, FLOWSVC_HOST: "127.0.0.1", FLOWSVC_PORT: "0", FLOWSVC_METRICS_PORT: "0" },
    /flowsvc-ingest listening/,
  );
  ingestUrl = /"url":"(http:\/\/[^"]+)","msg":"flowsvc-ingest listening"/.exec(ingestLog)![1]!;
  metricsUrl = /"url":"(http:\/\/[^"]+)","msg":"metrics listening"/.exec(ingestLog)![1]!;
  const configFile = join(dir, "config.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      agentServerUrl: ingestUrl,
      agent: { image: IMAGE },
      runTtlSecondsAfterFinished: 2,
      leaderElection: { enabled: false },
    }),
  );
  await startBin(
    "controller/dist/main.js",
    {
      ...common,
      FLOWSVC_CONFIG_FILE: configFile,
      FLOWSVC_POD_NAME: "controller-0",
      FLOWSVC_POD_NAMESPACE: "default",
      FLOWSVC_HEALTH_HOST: "127.0.0.1",
      FLOWSVC_HEALTH_PORT: "0",
      FLOWSVC_PUBLIC_URL: ingestUrl,
    },
    /leading: reconcilers/,
  );
});

after(async () => {
  for (const p of procs) p.kill("SIGTERM");
  await Promise.all(procs.map((p) => (p.exitCode === null ? new Promise<void>((r) => p.once("exit", () => r())) : Promise.resolve())));
  await kubelet?.stop();
  await db?.drop();
  await api?.close();
});

const flowRunsOf = async (): Promise<Cr[]> =>
  (
    (await custom.listNamespacedCustomObject({ group: "flowsvc.io", version: "v1alpha1", plural: "flowruns", namespace: NS })) as {
      items: Cr[];
    }
  ).items;

/** Emits an order event and follows its handler run to the end through its FlowRun; answers the run id and its log. */
const orderRun = async (known: Set<string>): Promise<{ runId: string; log: string; fr: Cr }> => {
  const emit = await flow(["emit", "order.created", "--payload", '{"n":1}']);
  assert.equal(emit.code, 0, emit.stderr);
  let fr: Cr | undefined;
  await waitFor(
    "a FlowRun for the handler run",
    async () => (fr = (await flowRunsOf()).find((f) => !known.has(f.metadata.name))) !== undefined,
    20_000,
  );
  const runId = fr!.metadata.name;
  known.add(runId);
  await waitFor(
    "a Pod owned by the FlowRun",
    async () =>
      (await core.listNamespacedPod({ namespace: NS, labelSelector: `flowsvc.io/run-id=${runId}` })).items.some((p) =>
        p.metadata?.ownerReferences?.some((o) => o.kind === "FlowRun" && o.uid === fr!.metadata.uid),
      ),
    20_000,
  );
  await waitFor(
    "FlowRun Succeeded",
    async () =>
      (fr = await getCr({ custom }, "flowruns", NS, runId))?.status?.conditions?.some(
        (c) => c.type === "Succeeded" && c.status === "True",
      ) === true,
    30_000,
  );
  const { rows } = await db.pool.query<{ data: string }>(`select data from run_logs where run_id = $1 and stream <> 'system' order by id`, [
    runId,
  ]);
  return { runId, log: rows.map((r) => r.data).join(""), fr: fr! };
};

const sha = (v: string): string => createHash("sha256").update(v).digest("hex");

test("kubectl apply a handler -> an event runs it in a Pod mirrored by a FlowRun; secrets masked, rotated, never in an object", async () => {
  const applied = await kubectl(["apply", "-f", "-"], manifests(FIRST));
  assert.equal(applied.code, 0, applied.stderr);
  await waitFor("handler Ready", async () => readyOf(await getCr({ custom }, "flowhandlers", NS, "on-order"))?.status === "True", 10_000);
  await waitFor("secret Ready", async () => readyOf(await getCr({ custom }, "flowsecrets", NS, "api-token"))?.status === "True", 10_000);

  const known = new Set<string>();
  const first = await orderRun(known);
  assert.match(first.log, /token=\*\*\*/);
  assert.ok(!first.log.includes(FIRST), "the value is masked in the log");
  assert.ok(first.log.includes(sha(FIRST)), "the run saw the Secret's value");
  assert.ok(Buffer.byteLength(JSON.stringify(first.fr)) < 4096);
  await waitFor(
    "the Pod cleaned up",
    async () => (await core.listNamespacedPod({ namespace: NS, labelSelector: `flowsvc.io/run-id=${first.runId}` })).items.length === 0,
    20_000,
  );

  // The controller's watches drop and the history is compacted (410 on reconnect); then the Secret rotates.
  api.dropWatches();
  api.compact();
  const rotated = await kubectl(["apply", "-f", "-"], manifests(SECOND));
  assert.equal(rotated.code, 0, rotated.stderr);
  await waitFor("setAt moves", async () => (await getCr({ custom }, "flowsecrets", NS, "api-token"))?.status?.setAt !== undefined, 10_000);
  let second: { runId: string; log: string } | undefined;
  await waitFor(
    "a run sees the rotated value",
    async () => {
      second = await orderRun(known);
      return second.log.includes(sha(SECOND));
    },
    60_000,
    10,
  );
  assert.ok(!second!.log.includes(SECOND));

  const yaml = (await kubectl(["get", "flowsvc,pods,events", "-A", "-o", "yaml"])).stdout;
  for (const v of [FIRST, SECOND, Buffer.from(FIRST).toString("base64"), Buffer.from(SECOND).toString("base64")])
    assert.ok(!yaml.includes(v), "no secret value in any flowsvc object, Pod or event");

  await waitFor(
    "the first FlowRun gone after its TTL",
    async () => (await getCr({ custom }, "flowruns", NS, first.runId)) === undefined,
    20_000,
  );
  const status = await flow(["status", first.runId, "-o", "json"]);
  assert.equal(status.code, 0, status.stderr);
  assert.equal((JSON.parse(status.stdout) as { status: string }).status, "succeeded");

  // /metrics: not on the app's (public) port; on the metrics port, the app's own counts (the runs' claims and step records, the 404 just answered).
  const publicScrape = await fetch(`${ingestUrl}/metrics`);
  assert.equal(publicScrape.status, 404);
  assert.equal(((await publicScrape.json()) as { error: { code: string } }).error.code, "not_found");
  const scrape = await fetch(`${metricsUrl}/metrics`);
  assert.equal(scrape.status, 200);
  assert.match(scrape.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  const text = await scrape.text();
  assert.match(text, /^flowsvc_http_requests_total\{method="GET",route="unmatched",status="404"\} [1-9]\d*$/m);
  assert.match(text, /^flowsvc_http_requests_total\{method="POST",route="\/agent\/v1\/claim",status="200"\} [1-9]\d*$/m);
  assert.match(text, /^flowsvc_job_claim_duration_seconds_count [1-9]\d*$/m);
  assert.match(text, /^flowsvc_runs\{status="succeeded",trigger="handler"\} [1-9]\d*$/m);
});
