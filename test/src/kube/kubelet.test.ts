// The kubelet simulator against the fake API server: Pods scheduled onto simulated nodes run as local
// processes with their env, secret refs and secret volumes; phases and exit codes are reported; a
// deleted Pod's process is stopped; a Pod no node fits stays Pending as Unschedulable.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, KubeConfig, Watch, type V1Pod } from "@kubernetes/client-node";
import { alive, waitFor } from "../support/wait.js";
import { refusal } from "./fixtures.js";
import { startKubelet, type Kubelet } from "./kubelet.js";
import { startFakeApiServer, type FakeApiServer } from "./server.js";

let api: FakeApiServer;
let kubelet: Kubelet;
let core: CoreV1Api;
let kc: KubeConfig;
const ns = "default";

const shPod = (name: string, script: string, extra: Partial<V1Pod["spec"]> = {}): V1Pod => ({
  metadata: { name },
  spec: { restartPolicy: "Never", containers: [{ name: "agent", image: "flowsvc/agent:test", command: ["sh", "-c", script] }], ...extra },
});
const read = (name: string) => core.readNamespacedPod({ name, namespace: ns });

before(async () => {
  api = await startFakeApiServer();
  kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  core = kc.makeApiClient(CoreV1Api);
  kubelet = await startKubelet({
    kubeconfigPath: api.kubeconfigPath,
    nodes: [{ name: "node-a", labels: { pool: "general" } }],
    pullable: ["flowsvc/agent:test", "x"],
  });
});
after(async () => {
  await kubelet.stop();
  await api.close();
});

describe("kubelet simulator", () => {
  test("a Pod runs with its env, a secretKeyRef and a mounted Secret (path remapped), and goes Pending -> Running -> Failed with its exit code", async () => {
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: "job-token" }, stringData: { token: "tok-123" } } });
    const phases: string[] = [];
    const watch = await new Watch(kc).watch(
      `/api/v1/namespaces/${ns}/pods`,
      { fieldSelector: "metadata.name=env" },
      (_t, p: V1Pod) => {
        if (phases.at(-1) !== p.status?.phase) phases.push(p.status?.phase ?? "");
      },
      () => undefined,
    );
    try {
      await core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: { name: "env" },
          spec: {
            restartPolicy: "Never",
            volumes: [{ name: "token", secret: { secretName: "job-token" } }],
            containers: [
              {
                name: "agent",
                image: "flowsvc/agent:test",
                command: ["sh", "-c", 'echo "plain=$PLAIN ref=$REF pod=$POD"; echo "file=$(cat "$TOKEN_FILE")"; exit 3'],
                env: [
                  { name: "PLAIN", value: "v1" },
                  { name: "REF", valueFrom: { secretKeyRef: { name: "job-token", key: "token" } } },
                  { name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
                  { name: "TOKEN_FILE", value: "/var/run/flowsvc/token" },
                ],
                volumeMounts: [{ name: "token", mountPath: "/var/run/flowsvc", readOnly: true }],
              },
            ],
          },
        },
      });
      await waitFor("the pod to fail", async () => (await read("env")).status?.phase === "Failed");
      const pod = await read("env");
      assert.equal(pod.spec?.nodeName, "node-a");
      assert.equal(pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode, 3);
      assert.equal(pod.status?.containerStatuses?.[0]?.state?.terminated?.reason, "Error");
      const log = kubelet.logs(ns, "env");
      assert.match(log, /plain=v1 ref=tok-123 pod=env/);
      assert.match(log, /file=tok-123/);
      await waitFor("the watch to have seen every phase", () => phases.includes("Failed"));
      assert.deepEqual(phases.filter((p) => p !== "").slice(0, 3), ["Pending", "Running", "Failed"]);
    } finally {
      watch.abort();
    }
  });

  test("an exit of 0 is Succeeded; restartPolicy OnFailure restarts a failing container and counts it", async () => {
    await core.createNamespacedPod({ namespace: ns, body: shPod("ok", "exit 0") });
    await waitFor("success", async () => (await read("ok")).status?.phase === "Succeeded");
    assert.equal((await read("ok")).status?.containerStatuses?.[0]?.state?.terminated?.reason, "Completed");

    await core.createNamespacedPod({
      namespace: ns,
      body: shPod(
        "flaky",
        'n=$(cat "$FAKE_KUBELET_POD_DIR/n" 2>/dev/null || echo 0); echo $((n+1)) > "$FAKE_KUBELET_POD_DIR/n"; [ "$n" -ge 1 ]',
        { restartPolicy: "OnFailure" },
      ),
    });
    await waitFor("the second run to succeed", async () => (await read("flaky")).status?.phase === "Succeeded");
    assert.equal((await read("flaky")).status?.containerStatuses?.[0]?.restartCount, 1);
  });

  test("deleting a running Pod sends SIGTERM, waits for the process, then the Pod is gone", async () => {
    await core.createNamespacedPod({
      namespace: ns,
      body: shPod("long", 'trap "echo got-term; exit 0" TERM; echo started; while true; do sleep 0.1; done'),
    });
    await waitFor("the process to run", () => kubelet.logs(ns, "long").includes("started"));
    const pid = kubelet.pid(ns, "long")!;
    assert.ok(alive(pid));
    await core.deleteNamespacedPod({ name: "long", namespace: ns });
    await waitFor("the pod to be gone", async () => (await refusal(read("long")).catch(() => ({ code: 200 }))).code === 404);
    assert.match(kubelet.logs(ns, "long"), /got-term/, "the process got SIGTERM before the Pod went");
    await waitFor("the process to end", () => !alive(pid));
  });

  test("a Pod whose nodeSelector no node satisfies stays Pending as Unschedulable and runs nothing", async () => {
    await core.createNamespacedPod({
      namespace: ns,
      body: shPod("gpu", "echo ran", { nodeSelector: { "flowsvc.io/capability-gpu": "true" } }),
    });
    await waitFor(
      "the Unschedulable condition",
      async () => (await read("gpu")).status?.conditions?.some((c) => c.type === "PodScheduled" && c.reason === "Unschedulable") === true,
    );
    const pod = await read("gpu");
    assert.equal(pod.status?.phase, "Pending");
    assert.equal(pod.spec?.nodeName, undefined);
    assert.match(
      pod.status?.conditions?.[0]?.message ?? "",
      /0\/1 nodes are available: 1 node\(s\) didn't match Pod's node affinity\/selector/,
    );
    assert.equal(kubelet.pid(ns, "gpu"), undefined);
    await core.deleteNamespacedPod({ name: "gpu", namespace: ns });
    assert.equal((await refusal(read("gpu"))).code, 404, "an unbound Pod is deleted at once");
  });

  test("a missing Secret keeps the container waiting in CreateContainerConfigError until it exists; an evicted Pod ends Failed/Evicted", async () => {
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        ...shPod("late", "echo late=$S; sleep 30"),
        spec: {
          restartPolicy: "Never",
          containers: [
            {
              name: "agent",
              image: "x",
              command: ["sh", "-c", "echo late=$S; sleep 30"],
              env: [{ name: "S", valueFrom: { secretKeyRef: { name: "later", key: "k" } } }],
            },
          ],
        },
      },
    });
    await waitFor(
      "CreateContainerConfigError",
      async () => (await read("late")).status?.containerStatuses?.[0]?.state?.waiting?.reason === "CreateContainerConfigError",
    );
    assert.match((await read("late")).status?.containerStatuses?.[0]?.state?.waiting?.message ?? "", /secret "later" not found/);
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: "later" }, stringData: { k: "now" } } });
    await waitFor("the pod to run", () => kubelet.logs(ns, "late").includes("late=now"));
    kubelet.evict(ns, "late");
    await waitFor("eviction", async () => (await read("late")).status?.reason === "Evicted");
    assert.equal((await read("late")).status?.phase, "Failed");
  });

  test("an image the registry does not have: ErrImagePull, then ImagePullBackOff, Pending, and nothing runs", async () => {
    const pod = shPod("nopull", "echo ran");
    pod.spec!.containers[0]!.image = "ghcr.io/flowsvc/agent:no-such-tag";
    await core.createNamespacedPod({ namespace: ns, body: pod });
    const waiting = async () => (await read("nopull")).status?.containerStatuses?.[0]?.state?.waiting;
    await waitFor("ErrImagePull or ImagePullBackOff", async () =>
      /^(ErrImagePull|ImagePullBackOff)$/.test((await waiting())?.reason ?? ""),
    );
    await waitFor("ImagePullBackOff", async () => (await waiting())?.reason === "ImagePullBackOff");
    assert.match((await waiting())?.message ?? "", /Back-off pulling image "ghcr.io\/flowsvc\/agent:no-such-tag"/);
    assert.equal((await read("nopull")).status?.phase, "Pending");
    assert.equal(kubelet.logs(ns, "nopull"), "", "nothing ran");
    await core.deleteNamespacedPod({ name: "nopull", namespace: ns });
    await waitFor("the Pod gone", () =>
      read("nopull").then(
        () => false,
        () => true,
      ),
    );
  });
});
