// A kubelet simulator (with the scheduler's binding step): it watches Pods through the fake API
// server's own HTTP API with the real client-node informer, as a kubelet is just another client of the
// apiserver (so it also works against any API server, and exercises the fake's watch path). For
// each Pod it
//   - binds it to the first simulated node it fits (nodeSelector, required node affinity, taints),
//     or leaves it Pending with PodScheduled=False/Unschedulable;
//   - runs its first container's command (or the argv its image maps to) as a local process with the
//     Pod's env and volumes (pod-process.ts has the path rule), reporting Pending -> Running ->
//     Succeeded/Failed with the exit code in containerStatuses, and restarting per restartPolicy;
//   - pulls only the images it knows (mapped in `images`, or listed in `pullable`): any other image
//     leaves the Pod Pending with its container waiting in ErrImagePull, then ImagePullBackOff, as
//     a kubelet reports an image its registry does not have;
//   - on deletion, sends SIGTERM to the process group, SIGKILL after the grace period, then confirms
//     with a delete of grace 0, as a kubelet does.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { constants, tmpdir } from "node:os";
import { join } from "node:path";
import {
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  makeInformer,
  setHeaderOptions,
  type V1Pod,
  type V1PodStatus,
} from "@kubernetes/client-node";
import { ContainerConfigError, prepareLaunch } from "./pod-process.js";
import { fits, unschedulableMessage, type SimNode } from "./scheduler.js";

export interface KubeletOptions {
  kubeconfigPath: string;
  /** Simulated nodes (default one, `node-1`, with no extra labels). */
  nodes?: SimNode[];
  /** Image -> entrypoint argv, for containers that give no command. */
  images?: Record<string, string[]>;
  /** Images the simulated registry has besides the mapped ones (containers that give their own command). */
  pullable?: string[];
  /** Env every process gets under the Pod's own (PATH is the host's unless set here). */
  baseEnv?: Record<string, string>;
}

interface PodRun {
  proc?: ChildProcess;
  exited?: Promise<void>;
  restarts: number;
  startedAt?: string;
  evicted?: boolean;
  deleting?: boolean;
  /** The image could not be pulled: the Pod stays Pending, nothing runs. */
  pullFailed?: boolean;
}

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const now = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
const keyOf = (pod: V1Pod): string => `${pod.metadata!.namespace}/${pod.metadata!.name}`;
const MAX_LOG = 1 << 20;

const condition = (type: string, status: boolean, reason?: string) => ({
  type,
  status: status ? "True" : "False",
  lastTransitionTime: new Date(),
  ...(reason ? { reason } : {}),
});

/** The Pod status after its container exited: terminal, or Running again when it restarts. */
const exitStatus = (pod: V1Pod, run: PodRun, exit: { exitCode: number; restart: boolean }): V1PodStatus => {
  const c = pod.spec!.containers[0]!;
  const reason = run.evicted ? "Evicted" : exit.exitCode === 0 ? "Completed" : "Error";
  const terminated = { exitCode: exit.exitCode, reason, startedAt: new Date(run.startedAt ?? now()), finishedAt: new Date() };
  const phase = exit.restart ? "Running" : exit.exitCode === 0 && !run.evicted ? "Succeeded" : "Failed";
  return {
    phase,
    ...(run.evicted ? { reason: "Evicted", message: "The node was low on resource: memory." } : {}),
    conditions: [
      condition("PodReadyToStartContainers", !exit.restart),
      condition("Initialized", true),
      condition("Ready", false, phase === "Succeeded" ? "PodCompleted" : "PodFailed"),
      condition("ContainersReady", false),
      condition("PodScheduled", true),
    ],
    containerStatuses: [
      {
        name: c.name,
        image: c.image ?? "",
        imageID: "",
        ready: false,
        started: false,
        restartCount: run.restarts,
        state: { terminated },
        ...(exit.restart ? { lastState: { terminated } } : {}),
      },
    ],
  };
};

export class Kubelet {
  private readonly core: CoreV1Api;
  private readonly informer;
  private readonly runs = new Map<string, PodRun>();
  /** Output per Pod (namespace/name), kept after the Pod is gone. */
  private readonly output = new Map<string, string>();
  private readonly queues = new Map<string, Promise<void>>();
  private readonly root = mkdtempSync(join(tmpdir(), "fake-kubelet-"));
  private readonly nodes: SimNode[];
  private stopped = false;

  constructor(
    kc: KubeConfig,
    private readonly opts: KubeletOptions,
  ) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.nodes = opts.nodes ?? [{ name: "node-1" }];
    this.informer = makeInformer(kc, "/api/v1/pods", () => this.core.listPodForAllNamespaces());
    this.informer.on("add", (pod) => this.enqueue(pod, () => this.sync(pod)));
    this.informer.on("update", (pod) => this.enqueue(pod, () => this.sync(pod)));
    this.informer.on("delete", (pod) => this.enqueue(pod, () => this.gone(pod)));
  }

  async start(): Promise<void> {
    for (const n of this.nodes) await this.registerNode(n);
    await this.informer.start();
  }

  private async registerNode(n: SimNode): Promise<void> {
    const labels = { "kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", ...n.labels };
    await this.core
      .createNode({
        body: {
          metadata: { name: n.name, labels },
          spec: { taints: n.taints ?? [] },
          status: { conditions: [{ type: "Ready", status: "True" }] },
        },
      })
      .catch(() => undefined);
  }

  /**
   * A node joins (a cluster scaling up): it is registered, and Pods left Pending are scheduled again,
   * as the scheduler retries unschedulable Pods when a node is added.
   */
  async addNode(node: SimNode): Promise<void> {
    this.nodes.push(node);
    await this.registerNode(node);
    for (const pod of this.informer.list())
      if (!pod.spec?.nodeName && !pod.metadata?.deletionTimestamp) this.enqueue(pod, () => this.sync(pod));
  }

  /** Per-Pod serial work: events of one Pod are handled in order, Pods in parallel. */
  private enqueue(pod: V1Pod, work: () => Promise<void>): void {
    const key = keyOf(pod);
    const next = (this.queues.get(key) ?? Promise.resolve()).then(work).catch(() => undefined);
    this.queues.set(key, next);
  }

  private ours(pod: V1Pod): boolean {
    return this.nodes.some((n) => n.name === pod.spec?.nodeName);
  }

  private async sync(pod: V1Pod): Promise<void> {
    if (this.stopped) return;
    if (pod.metadata?.deletionTimestamp) return this.terminate(pod);
    if (!pod.spec?.nodeName) return this.schedule(pod);
    const phase = pod.status?.phase;
    if (this.ours(pod) && !this.runs.has(keyOf(pod)) && phase !== "Succeeded" && phase !== "Failed") return this.run(pod);
  }

  private async schedule(pod: V1Pod): Promise<void> {
    const node = this.nodes.find((n) => fits(pod, n));
    const { name, namespace } = pod.metadata as { name: string; namespace: string };
    if (node) {
      await this.core.createNamespacedPodBinding({
        name,
        namespace,
        body: { metadata: { name }, target: { apiVersion: "v1", kind: "Node", name: node.name } },
      });
      return;
    }
    const message = unschedulableMessage(pod, this.nodes);
    const current = pod.status?.conditions?.find((c) => c.type === "PodScheduled");
    if (current?.reason === "Unschedulable" && current.message === message) return;
    await this.patchStatus(pod, { phase: "Pending", conditions: [{ ...condition("PodScheduled", false, "Unschedulable"), message }] });
  }

  private patchStatus(pod: V1Pod, status: V1PodStatus): Promise<unknown> {
    const { name, namespace } = pod.metadata as { name: string; namespace: string };
    return this.core.patchNamespacedPodStatus({ name, namespace, body: { status } }, mergePatch);
  }

  private podDir(pod: V1Pod): string {
    return join(this.root, `${pod.metadata!.namespace}_${pod.metadata!.name}_${pod.metadata!.uid}`);
  }

  private knows(image: string | undefined): boolean {
    return image !== undefined && (image in (this.opts.images ?? {}) || (this.opts.pullable ?? []).includes(image));
  }

  /** ErrImagePull, then ImagePullBackOff (a kubelet's messages), while the Pod exists; nothing runs. */
  private async pullFailed(pod: V1Pod, run: PodRun): Promise<void> {
    run.pullFailed = true;
    const c = pod.spec!.containers[0]!;
    const image = c.image ?? "";
    const waiting = (reason: string, message: string): V1PodStatus => ({
      phase: "Pending",
      conditions: [condition("PodScheduled", true), condition("Ready", false, "ContainersNotReady")],
      containerStatuses: [{ name: c.name, image, imageID: "", ready: false, restartCount: 0, state: { waiting: { reason, message } } }],
    });
    await this.patchStatus(
      pod,
      waiting("ErrImagePull", `failed to pull and unpack image "${image}": failed to resolve reference "${image}": ${image}: not found`),
    ).catch(() => undefined);
    setTimeout(
      () =>
        this.enqueue(pod, async () => {
          if (this.runs.get(keyOf(pod)) === run && !this.stopped)
            await this.patchStatus(pod, waiting("ImagePullBackOff", `Back-off pulling image "${image}"`)).catch(() => undefined);
        }),
      300,
    ).unref();
  }

  private async run(pod: V1Pod): Promise<void> {
    const run: PodRun = this.runs.get(keyOf(pod)) ?? { restarts: 0 };
    this.runs.set(keyOf(pod), run);
    const c = pod.spec!.containers[0]!;
    if (!this.knows(c.image)) return this.pullFailed(pod, run);
    let launch;
    try {
      launch = await prepareLaunch(this.core, pod, { podDir: this.podDir(pod), images: this.opts.images ?? {} });
    } catch (err) {
      if (!(err instanceof ContainerConfigError)) throw err;
      this.runs.delete(keyOf(pod));
      await this.patchStatus(pod, {
        phase: "Pending",
        containerStatuses: [
          {
            name: c.name,
            image: c.image ?? "",
            imageID: "",
            ready: false,
            restartCount: 0,
            state: { waiting: { reason: "CreateContainerConfigError", message: err.message } },
          },
        ],
      });
      setTimeout(() => this.enqueue(pod, () => this.retry(pod)), 500).unref();
      return;
    }
    mkdirSync(launch.cwd, { recursive: true });
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", ...this.opts.baseEnv, HOSTNAME: pod.metadata!.name!, ...launch.env };
    const proc = spawn(launch.argv[0]!, launch.argv.slice(1), { cwd: launch.cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    run.proc = proc;
    run.startedAt = now();
    const key = keyOf(pod);
    const keep = (d: Buffer): void => void this.output.set(key, ((this.output.get(key) ?? "") + d.toString()).slice(-MAX_LOG));
    proc.stdout?.on("data", keep);
    proc.stderr?.on("data", keep);
    run.exited = new Promise((resolve) => {
      proc.on("error", (err) => void keep(Buffer.from(`${err.message}\n`)));
      proc.on("close", (code, signal) => {
        resolve();
        this.enqueue(pod, () => this.exited(pod, run, code ?? 128 + (signal ? constants.signals[signal] : 0)));
      });
    });
    await this.patchStatus(pod, {
      phase: "Running",
      hostIP: "127.0.0.1",
      podIP: "127.0.0.1",
      podIPs: [{ ip: "127.0.0.1" }],
      startTime: new Date(),
      conditions: [
        condition("PodReadyToStartContainers", true),
        condition("Initialized", true),
        condition("Ready", true),
        condition("ContainersReady", true),
        condition("PodScheduled", true),
      ],
      containerStatuses: [
        {
          name: c.name,
          image: c.image ?? "",
          imageID: "",
          containerID: `sim://${proc.pid}`,
          ready: true,
          started: true,
          restartCount: run.restarts,
          state: { running: { startedAt: new Date(run.startedAt) } },
        },
      ],
    }).catch(() => undefined);
  }

  private async retry(pod: V1Pod): Promise<void> {
    const fresh = await this.core
      .readNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace! })
      .catch(() => undefined);
    if (fresh && fresh.metadata?.uid === pod.metadata?.uid) await this.sync(fresh);
  }

  private async exited(pod: V1Pod, run: PodRun, exitCode: number): Promise<void> {
    run.proc = undefined;
    const policy = pod.spec?.restartPolicy ?? "Always";
    const restart = !run.deleting && !run.evicted && !this.stopped && (policy === "Always" || (policy === "OnFailure" && exitCode !== 0));
    if (!run.deleting) await this.patchStatus(pod, exitStatus(pod, run, { exitCode, restart })).catch(() => undefined);
    if (restart) {
      run.restarts++;
      await this.run(pod);
    }
  }

  private async terminate(pod: V1Pod): Promise<void> {
    if (!this.ours(pod)) return;
    const run = this.runs.get(keyOf(pod));
    if (run?.proc && !run.deleting) {
      run.deleting = true;
      this.signal(run.proc, "SIGTERM");
      const grace = (pod.metadata?.deletionGracePeriodSeconds ?? 30) * 1000;
      const kill = setTimeout(() => run.proc && this.signal(run.proc, "SIGKILL"), grace);
      await run.exited;
      clearTimeout(kill);
    } else if (run?.deleting) {
      return;
    }
    const { name, namespace, uid } = pod.metadata as { name: string; namespace: string; uid: string };
    await this.core
      .deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid } } })
      .catch(() => undefined);
  }

  private async gone(pod: V1Pod): Promise<void> {
    const run = this.runs.get(keyOf(pod));
    this.runs.delete(keyOf(pod));
    if (run?.proc) {
      run.deleting = true;
      this.signal(run.proc, "SIGKILL");
      await run.exited;
    }
    rmSync(this.podDir(pod), { recursive: true, force: true });
  }

  private signal(proc: ChildProcess, sig: NodeJS.Signals): void {
    try {
      process.kill(-proc.pid!, sig);
    } catch {
      // already gone
    }
  }

  /** The pid of a Pod's running process, if any. */
  pid(namespace: string, name: string): number | undefined {
    return this.runs.get(`${namespace}/${name}`)?.proc?.pid;
  }

  /** What the Pod's process printed (stdout and stderr interleaved, last 1 MiB), also after the Pod is gone. */
  logs(namespace: string, name: string): string {
    return this.output.get(`${namespace}/${name}`) ?? "";
  }

  /** Kills a Pod's process as a crash would (it then fails, or restarts per its restartPolicy). */
  crash(namespace: string, name: string, sig: NodeJS.Signals = "SIGKILL"): void {
    const proc = this.runs.get(`${namespace}/${name}`)?.proc;
    if (proc) this.signal(proc, sig);
  }

  /** Evicts a Pod: its process is killed and it ends Failed with reason Evicted. */
  evict(namespace: string, name: string): void {
    const run = this.runs.get(`${namespace}/${name}`);
    if (!run?.proc) return;
    run.evicted = true;
    this.signal(run.proc, "SIGKILL");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.informer.stop();
    const waits: Promise<void>[] = [];
    for (const run of this.runs.values()) {
      if (!run.proc) continue;
      run.deleting = true;
      this.signal(run.proc, "SIGKILL");
      if (run.exited) waits.push(run.exited);
    }
    await Promise.all(waits);
    await Promise.allSettled([...this.queues.values()]);
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** Starts a kubelet simulator against the API server of `opts.kubeconfigPath`. */
export const startKubelet = async (opts: KubeletOptions): Promise<Kubelet> => {
  const kc = new KubeConfig();
  kc.loadFromFile(opts.kubeconfigPath);
  const kubelet = new Kubelet(kc, opts);
  await kubelet.start();
  return kubelet;
};
