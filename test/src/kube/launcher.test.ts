// The Kubernetes Pod launcher with the real dispatcher, a real Postgres and the real ingest, against
// the fake API server and the kubelet simulator (which runs each agent Pod as `node
// agent-image/dist/main.js`): one Pod per job, its token only in a Secret the Pod owns, a Pending Pod
// given back without spending an attempt, an evicted or deleted Pod redispatched, the caps, and a
// restarted launcher adopting the Pods in flight.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CustomObjectsApi, Watch, type V1Pod, type V1Secret } from "@kubernetes/client-node";
import { ConfigFileSchema, Dispatcher, type ConfigFile } from "@flowsvc/controller";
import {
  AGENT_NETWORK_POLICY_RECHECK_MS,
  AgentNetworkPolicies,
  NETWORK_POLICY_RETRY_MS,
  PodLauncher,
  kubeClients,
} from "@flowsvc/controller/kube";
import { BasicRunOwners } from "./basic-run-owners.js";
import { cancelRun, withTransaction } from "@flowsvc/store";
import { waitFor } from "../support/wait.js";
import { AGENT_IMAGE, jobRow, podsOf, recordingLogger, runStatus, startPeers, submitScript, type Peers } from "./launcher-peers.js";

const settings = ConfigFileSchema.parse({
  agent: {
    image: AGENT_IMAGE,
    capabilities: ["polyglot", "gpu"],
    capabilityScheduling: {
      gpu: { nodeSelector: { accelerator: "gpu" }, tolerations: [{ key: "gpu", operator: "Exists", effect: "NoSchedule" }] },
    },
    maxPods: 3,
    maxPodsPerProject: 2,
    pendingTimeoutSeconds: 60,
  },
}).agent;

interface Controller {
  launcher: PodLauncher;
  dispatcher: Dispatcher;
  log: ReturnType<typeof recordingLogger>;
  stop(): Promise<void>;
}

let peers: Peers;
const LEASE_MS = 15_000;

/** A controller's leader half, in-process: the Pod launcher and the dispatcher, as main.ts wires them. */
const startController = async (
  identity: string,
  agent: Partial<typeof settings> = {},
  policy?: ConfigFile["agentNetworkPolicy"],
  now?: () => number,
): Promise<Controller> => {
  const log = recordingLogger();
  const clients = kubeClients(peers.kc);
  const networkPolicies =
    policy && new AgentNetworkPolicies({ networking: clients.networking, spec: policy, logger: log, ...(now ? { now } : {}) });
  const events = { d: undefined as Dispatcher | undefined };
  const launcher = new PodLauncher({
    clients,
    owners: new BasicRunOwners(peers.db.pool, clients),
    settings: { ...settings, ...agent },
    serverUrl: peers.ingestUrl,
    watchNamespaces: [],
    leaseMs: LEASE_MS,
    identity,
    logger: log,
    ...(networkPolicies ? { networkPolicies } : {}),
    events: {
      agentExited: (req) => events.d?.agentExited(req),
      launchFailed: (req, reason, ms, opts) => events.d?.launchFailed(req, reason, ms, opts),
      slotFreed: () => events.d?.nudge(),
    },
  });
  const dispatcher = new Dispatcher({
    pool: peers.db.pool,
    listener: peers.listener,
    launchers: [launcher],
    leaseMs: LEASE_MS,
    maxAttempts: 5,
    publicUrl: undefined,
    logger: log,
    intervals: { pollMs: 100 },
  });
  events.d = dispatcher;
  await dispatcher.start();
  return {
    launcher,
    dispatcher,
    log,
    async stop() {
      dispatcher.stop();
      await launcher.stop();
      await dispatcher.drain();
    },
  };
};

/**
 * Ends a run and deletes its Pods at once (its agent would hear of the cancel only at its next
 * heartbeat), so they hold no slot into the next step: the job is over, so nothing is redispatched.
 */
const cancel = async (runId: string, namespace: string, jobId: string): Promise<void> => {
  await withTransaction(peers.db.pool, (tx) => cancelRun(tx, runId, "test over", undefined));
  for (const p of await podsOf(peers, namespace, jobId))
    await peers.core.deleteNamespacedPod({ name: p.metadata!.name!, namespace }).catch(() => undefined);
};

const runningPod = async (namespace: string, jobId: string, attempt: number): Promise<V1Pod> => {
  let pod: V1Pod | undefined;
  await waitFor(`job ${jobId}'s Pod of attempt ${attempt} running its claimed job`, async () => {
    pod = (await podsOf(peers, namespace, jobId)).find(
      (p) => p.metadata?.annotations?.["flowsvc.io/attempt"] === String(attempt) && p.status?.phase === "Running",
    );
    const row = await jobRow(peers, jobId);
    return pod !== undefined && row.status === "running" && row.attempt === attempt;
  });
  return pod!;
};

/** The Pod as the contract has it: owned by the run's FlowRun, locked down, told where its token file is. */
const assertAgentPod = async (pod: V1Pod, runId: string): Promise<void> => {
  const flowRun = (await peers.kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
    group: "flowsvc.io",
    version: "v1alpha1",
    namespace: pod.metadata!.namespace!,
    plural: "flowruns",
    name: runId,
  })) as { metadata: { uid: string } };
  assert.deepEqual(pod.metadata?.ownerReferences, [
    { apiVersion: "flowsvc.io/v1alpha1", kind: "FlowRun", name: runId, uid: flowRun.metadata.uid, blockOwnerDeletion: false },
  ]);
  const spec = pod.spec!;
  const container = spec.containers[0]!;
  assert.equal(spec.automountServiceAccountToken, false);
  assert.equal(spec.restartPolicy, "Never");
  assert.equal(container.securityContext?.readOnlyRootFilesystem, true);
  assert.deepEqual(container.securityContext?.capabilities?.drop, ["ALL"]);
  assert.equal(container.env?.find((e) => e.name === "FLOW_JOB_TOKEN_FILE")?.value, "/var/run/flowsvc/job/token");
  assert.ok(!container.env?.some((e) => e.name === "FLOW_JOB_TOKEN"));
};

/** The token is in the Secret the Pod owns, and in no version of the Pod the watch saw. */
const assertTokenOnlyInSecret = (seen: { pods: V1Pod[]; secrets: V1Secret[] }, pod: V1Pod): void => {
  const secret = seen.secrets.find((s) => s.metadata?.name === `${pod.metadata!.name}-token`);
  const data = secret?.data?.["token"];
  assert.ok(secret && data, "the job's token Secret");
  assert.deepEqual(
    secret.metadata?.ownerReferences?.map((r) => [r.kind, r.name, r.uid]),
    [["Pod", pod.metadata!.name, pod.metadata?.uid]],
  );
  const token = Buffer.from(data, "base64").toString();
  assert.match(token, /^job_/);
  for (const p of seen.pods) assert.ok(!JSON.stringify(p).includes(token), "no version of the Pod carries the token");
};

before(async () => {
  peers = await startPeers({ leaseMs: LEASE_MS });
});
after(async () => {
  await peers?.close();
});

describe("the Pod launcher", () => {
  test("a job runs in its own Pod and succeeds; the token is only in the Pod-owned Secret; Pod and Secret go when it ends", async () => {
    const seen: { pods: V1Pod[]; secrets: V1Secret[] } = { pods: [], secrets: [] };
    const watches = await Promise.all(
      (["pods", "secrets"] as const).map((kind) =>
        new Watch(peers.kc).watch(
          `/api/v1/namespaces/team-a/${kind}`,
          {},
          (_type, obj: V1Pod & V1Secret) => void seen[kind].push(obj),
          () => undefined,
        ),
      ),
    );
    const c = await startController("controller-1");
    try {
      const { runId, jobId } = await submitScript(peers, "team-a", 'echo "hello from $FLOW_AGENT_ID"\n');
      await waitFor("the run to succeed", async () => (await runStatus(peers, runId)) === "succeeded");
      await waitFor("its Pod and its token Secret to be gone", async () => {
        const secrets = await peers.core.listNamespacedSecret({ namespace: "team-a", labelSelector: `flowsvc.io/job-id=${jobId}` });
        return (await podsOf(peers, "team-a", jobId)).length === 0 && secrets.items.length === 0;
      });
      const pod = seen.pods.find((p) => p.metadata?.name === jobId);
      assert.ok(pod, "a Pod named after the job");
      await assertAgentPod(pod, runId);
      assertTokenOnlyInSecret(seen, pod);
      assert.match(peers.kubelet.logs("team-a", jobId), /agent done/);
      assert.equal((await jobRow(peers, jobId)).attempt, 1);
    } finally {
      for (const w of watches) w.abort();
      await c.stop();
    }
  });

  test("a Pod no node fits is given back after the pending timeout without spending attempts; it runs once a node fits", async () => {
    // A short timeout here only: on a loaded host a Pod may take seconds to start running.
    const c = await startController("controller-1", { pendingTimeoutSeconds: 1 });
    try {
      const { runId, jobId } = await submitScript(peers, "team-b", "true\n", ["gpu"]);
      const givenBack = () => c.log.lines.filter((l) => l.msg.startsWith("agent did not start") && l.obj["jobId"] === jobId);
      await waitFor("the job given back", () => givenBack().length >= 1);
      // The scheduler's reason once it marked the Pod Unschedulable (on a loaded host it may not have yet).
      assert.match(String(givenBack()[0]!.obj["reason"]), /didn't match Pod's node affinity\/selector|not scheduled after 1 s/);
      // Each give-back returned the attempt: still the first, with five allowed.
      assert.ok((await jobRow(peers, jobId)).attempt <= 1);
      await peers.kubelet.addNode({ name: "gpu-1", labels: { accelerator: "gpu" }, taints: [{ key: "gpu", effect: "NoSchedule" }] });
      await waitFor("the run to succeed on the gpu node", async () => (await runStatus(peers, runId)) === "succeeded");
      assert.equal((await jobRow(peers, jobId)).attempt, 1);
    } finally {
      await c.stop();
    }
  });

  test("a Pod whose image cannot be pulled is deleted and its job given back without spending its attempt, the reason logged", async () => {
    const c = await startController("controller-1", { image: "ghcr.io/flowsvc/agent:no-such-tag" });
    const { runId, jobId } = await submitScript(peers, "team-b", "true\n");
    try {
      const givenBack = () => c.log.lines.filter((l) => l.msg.startsWith("agent did not start") && l.obj["jobId"] === jobId);
      await waitFor("the job given back", () => givenBack().length >= 1);
      assert.match(
        String(givenBack()[0]!.obj["reason"]),
        /^(ErrImagePull: failed to pull and unpack image "ghcr.io\/flowsvc\/agent:no-such-tag"|ImagePullBackOff: Back-off pulling image "ghcr.io\/flowsvc\/agent:no-such-tag")/,
      );
      await waitFor("its Pod deleted", async () => (await podsOf(peers, "team-b", jobId)).every((p) => p.metadata?.deletionTimestamp));
      const row = await jobRow(peers, jobId);
      assert.ok(row.attempt <= 1, `the attempt was returned (attempt ${row.attempt})`);
      assert.notEqual(await runStatus(peers, runId), "failed");
    } finally {
      await c.stop();
    }
    // With the image fixed (a new controller release), the same job runs on its first attempt.
    const fixed = await startController("controller-2");
    try {
      await waitFor("the run to succeed", async () => (await runStatus(peers, runId)) === "succeeded");
      assert.equal((await jobRow(peers, jobId)).attempt, 1);
    } finally {
      await fixed.stop();
    }
  });

  test("a restarted launcher adopts the running Pod (nothing launched twice); an evicted and then a deleted Pod get the job redispatched", async () => {
    const first = await startController("controller-1");
    const { runId, jobId } = await submitScript(peers, "team-a", "sleep 60\n");
    let second: Controller | undefined;
    try {
      await runningPod("team-a", jobId, 1);
      const free = first.launcher.free();
      await first.stop();
      second = await startController("controller-2");
      assert.equal(second.launcher.free(), free, "the adopted Pod counts against maxPods");
      assert.ok(second.log.lines.some((l) => l.msg === "adopted an agent Pod" && l.obj["jobId"] === jobId));
      assert.equal((await podsOf(peers, "team-a", jobId)).length, 1);

      peers.kubelet.evict("team-a", jobId);
      const a2 = await runningPod("team-a", jobId, 2);
      assert.equal(a2.metadata?.name, `${jobId}-a2`);
      await peers.core.deleteNamespacedPod({ name: `${jobId}-a2`, namespace: "team-a" });
      await runningPod("team-a", jobId, 3);
      await cancel(runId, "team-a", jobId);
      await waitFor("the cancelled job's Pods to be gone", async () => (await podsOf(peers, "team-a", jobId)).length === 0);
    } finally {
      await first.stop();
      await second?.stop();
    }
  });

  test("at most maxPodsPerProject Pods per project and maxPods in all; the rest wait their turn", async () => {
    const c = await startController("controller-1");
    const runs = [];
    for (const ns of ["team-a", "team-a", "team-a", "team-b"] as const) runs.push({ ns, ...(await submitScript(peers, ns, "sleep 60\n")) });
    try {
      const pods = async (ns: string) =>
        (await peers.core.listNamespacedPod({ namespace: ns, labelSelector: "app.kubernetes.io/name=flowsvc-agent" })).items;
      await waitFor("two team-a Pods and one team-b Pod, and team-a's third job held back", async () => {
        const held = c.log.lines.some((l) => l.msg.startsWith("agent did not start") && /maxPodsPerProject/.test(String(l.obj["reason"])));
        return held && (await pods("team-a")).length === 2 && (await pods("team-b")).length === 1;
      });
      assert.equal(c.launcher.free(), 0);
      const queued = await Promise.all(runs.map((r) => jobRow(peers, r.jobId)));
      assert.equal(queued.filter((r) => r.status === "queued").length, 1, "one team-a job waits in the queue");
      assert.ok(
        queued.every((r) => r.attempt <= 1),
        "holding a job back spends no attempt",
      );
      // One ends: the held-back job gets its slot.
      const teamA = runs.slice(0, 3);
      const rows = await Promise.all(teamA.map((r) => jobRow(peers, r.jobId)));
      const held = teamA[rows.findIndex((r) => r.status === "queued")]!;
      const done = teamA[rows.findIndex((r) => r.status !== "queued")]!;
      await cancel(done.runId, "team-a", done.jobId);
      await waitFor("the held-back team-a job to get a Pod", async () => (await podsOf(peers, "team-a", held.jobId)).length === 1);
    } finally {
      for (const r of runs) await cancel(r.runId, r.ns, r.jobId).catch(() => undefined); // some ended already
      await c.stop();
    }
  });
  test("agent NetworkPolicy: none read or written unless configured; made before a namespace's first Pod, and again after a delete; refused by RBAC, no Pod and the run told", async () => {
    const policyRequests = () => peers.api.requests.filter((r) => r.path.includes("/networkpolicies"));
    assert.deepEqual(policyRequests(), [], "the launchers above had no policy configured: none read or written");
    const spec = ConfigFileSchema.parse({
      agentNetworkPolicy: {
        podSelector: { matchLabels: { "app.kubernetes.io/name": "flowsvc-agent", "app.kubernetes.io/managed-by": "flowsvc" } },
        policyTypes: ["Ingress", "Egress"],
        egress: [{ to: [{ ipBlock: { cidr: "0.0.0.0/0", except: ["169.254.0.0/16"] } }] }],
      },
    }).agentNetworkPolicy;
    peers.api.forbid((a) => a.resource === "networkpolicies" && a.namespace === "team-b");
    const seen: V1Pod[] = [];
    const watch = await new Watch(peers.kc).watch(
      "/api/v1/namespaces/team-a/pods",
      {},
      (_type, pod: V1Pod) => void seen.push(pod),
      () => undefined,
    );
    const clock = { ms: Date.now() };
    const c = await startController("controller-1", {}, spec, () => clock.ms);
    const from = peers.api.requests.length;
    const a = await submitScript(peers, "team-a", "true\n");
    const b = await submitScript(peers, "team-b", "true\n");
    let a2: Awaited<ReturnType<typeof submitScript>> | undefined;
    try {
      await waitFor("the team-a run to succeed", async () => (await runStatus(peers, a.runId)) === "succeeded");
      const served = peers.api.requests.slice(from).map((r) => `${r.method} ${r.path.split("?")[0]} ${r.status}`);
      const made = served.indexOf("POST /apis/networking.k8s.io/v1/namespaces/team-a/networkpolicies 201");
      const pod = served.indexOf("POST /api/v1/namespaces/team-a/pods 201");
      assert.ok(made >= 0 && pod > made, `the policy is made before the Pod:\n${served.join("\n")}`);
      const policy = await kubeClients(peers.kc).networking.readNamespacedNetworkPolicy({ name: "flowsvc-agent", namespace: "team-a" });
      const podLabels = seen.find((p) => p.metadata?.name === a.jobId)?.metadata?.labels ?? {};
      for (const [k, v] of Object.entries(policy.spec?.podSelector?.matchLabels ?? {}))
        assert.equal(podLabels[k], v, `the Pod's label ${k}`);

      // Deleted while the controller runs (the README's cleanup line): the first launch after the recheck bound makes it again, before its Pod.
      await kubeClients(peers.kc).networking.deleteNamespacedNetworkPolicy({ name: "flowsvc-agent", namespace: "team-a" });
      clock.ms += AGENT_NETWORK_POLICY_RECHECK_MS;
      const again = peers.api.requests.length;
      a2 = await submitScript(peers, "team-a", "true\n");
      const served2 = () => peers.api.requests.slice(again).map((r) => `${r.method} ${r.path.split("?")[0]} ${r.status}`);
      const podMade = "POST /api/v1/namespaces/team-a/pods 201";
      await waitFor("the second team-a run's Pod made", () => served2().includes(podMade));
      const remade = served2().indexOf("POST /apis/networking.k8s.io/v1/namespaces/team-a/networkpolicies 201");
      assert.ok(remade >= 0 && served2().indexOf(podMade) > remade, `the policy is made again before the Pod:\n${served2().join("\n")}`);

      // team-b: the policy cannot be read (403): no Pod, the job back in the queue unspent, the run told once.
      const told = async () =>
        (await peers.db.pool.query<{ data: string }>(`select data from run_logs where run_id = $1 and stream = 'system'`, [b.runId])).rows;
      await waitFor("the team-b run told why", async () => (await told()).length > 0);
      const [line] = await told();
      assert.match(
        line!.data,
        /^flowsvc: the agent did not start: the agent NetworkPolicy flowsvc-agent could not be ensured in namespace team-b \(403: networkpolicies\.networking\.k8s\.io "flowsvc-agent" is forbidden: User "[^"]+" cannot get resource "networkpolicies" in API group "networking\.k8s\.io" in the namespace "team-b"\), so no agent Pod is made there: give the controller get, create and update on networkpolicies .*; the job is tried again every 10 s\n$/,
      );
      assert.equal(NETWORK_POLICY_RETRY_MS, 10_000);
      assert.deepEqual(await podsOf(peers, "team-b", b.jobId), [], "no Pod without the policy");
      assert.ok(!peers.api.requests.slice(from).some((r) => r.method === "POST" && r.path.startsWith("/api/v1/namespaces/team-b/")));
      const row = await jobRow(peers, b.jobId);
      assert.deepEqual([row.status, row.attempt <= 1], ["queued", true], "given back without spending its attempt");
    } finally {
      watch.abort();
      peers.api.forbid(undefined);
      await cancel(b.runId, "team-b", b.jobId);
      if (a2) await cancel(a2.runId, "team-a", a2.jobId);
      await c.stop();
    }
  });
});
