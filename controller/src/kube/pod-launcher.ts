/**
 * The Kubernetes Launcher (issue 16, item 5): one agent Pod per dispatched job, made as pods.ts says,
 * with the job's token in a per-job Secret owned by the Pod. It watches its Pods with client-node's
 * informer (a list, then a watch from its resourceVersion; a 410 relists, a dropped watch resumes,
 * any other error restarts it after a back-off) and turns what it sees into the port's events:
 * - a Pod that ends (Succeeded or Failed, evicted included) or vanishes: `agentExited`, which
 *   requeues the job if its agent did not finish it, as an agent death is today; the Pod is deleted
 *   (its Secret goes with it, by the garbage collector);
 * - a Pod not scheduled within `pendingTimeoutSeconds`, or whose image cannot be pulled: deleted, and
 *   `launchFailed`, which gives the job back without spending an attempt (a scheduled Pod that is
 *   slow to start is left to the dispatch lease, which covers the pending timeout too);
 * - a project at `maxPodsPerProject`: `launchFailed` at once (no Pod is made); `free()` stops at
 *   `maxPods`;
 * - with an agent NetworkPolicy configured, a namespace whose policy cannot be ensured
 *   (agent-network-policies.ts: RBAC refused it, the API failed): no Pod is made there, and
 *   `launchFailed` with why and the fix, told to the run too, retried after NETWORK_POLICY_RETRY_MS.
 * Its first list adopts the Pods a previous controller made (by label), so a restarted controller
 * counts them against the caps and reports their ends: nothing is launched twice.
 */
import { makeInformer, type Informer, type KubernetesListObject, type ObjectCache, type V1Pod } from "@kubernetes/client-node";
import type { AgentPodSettings } from "../config.js";
import type { ControllerLogger } from "../dispatcher.js";
import type { LaunchRequest, Launcher, LauncherEvents } from "../launcher.js";
import { AgentNetworkPolicyError, type AgentNetworkPolicies } from "./agent-network-policies.js";
import { apiMessage, apiStatus, type KubeClients } from "./client.js";
import { AGENT_SELECTOR, agentPod, dispatchOf, podNameFor, podState, tokenSecret } from "./pods.js";
import type { RunOwners } from "./run-owners.js";

export interface PodLauncherOptions {
  clients: KubeClients;
  owners: RunOwners;
  settings: AgentPodSettings;
  /** How agent Pods reach ingest (agentServerUrl). */
  serverUrl: string;
  /** [] = every namespace; else one informer per namespace. */
  watchNamespaces: readonly string[];
  /** The agents' lease (ms): a dispatch's lease is this plus the pending timeout (see dispatchLeaseMs). */
  leaseMs: number;
  /** This controller's identity (the Lease holder), written on each Pod it makes. */
  identity: string;
  events: LauncherEvents;
  logger: ControllerLogger;
  /** The agent NetworkPolicy each namespace must have before its first agent Pod; unset: none is read or written. */
  networkPolicies?: AgentNetworkPolicies;
}

/** How long a job waits before it is dispatched again after its Pod could not be made or started. */
const RETRY_MS = 1000;
/** The same when a namespace's agent NetworkPolicy could not be ensured (RBAC or the API: not fixed in a second). */
export const NETWORK_POLICY_RETRY_MS = 10_000;
/** Back-off before an informer that failed (not a 410 or a dropped watch: those it handles itself) starts again. */
const INFORMER_RESTART_MS = 1000;

type PodInformer = Informer<V1Pod> & ObjectCache<V1Pod>;

interface Tracked {
  req: Omit<LaunchRequest, "token">;
  namespace: string | undefined;
  /** When the launch began (a Pod not seen yet still times out). */
  since: number;
  /** It ended and was reported: only its deletion is left. */
  done: boolean;
}

export class PodLauncher implements Launcher {
  readonly capabilities: readonly string[];
  readonly dispatchLeaseMs: number;
  readonly #o: PodLauncherOptions;
  readonly #pendingMs: number;
  /** Every dispatch with a Pod (or one being made), by Pod name (job ids are unique, so names are). */
  readonly #tracked = new Map<string, Tracked>();
  readonly #informers: PodInformer[] = [];
  #sweeper: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(opts: PodLauncherOptions) {
    this.#o = opts;
    this.capabilities = opts.settings.capabilities;
    this.#pendingMs = opts.settings.pendingTimeoutSeconds * 1000;
    this.dispatchLeaseMs = this.#pendingMs + opts.leaseMs;
  }

  free(): number {
    if (this.#stopped) return 0;
    return Math.max(0, this.#o.settings.maxPods - this.#live().length);
  }

  /** Pods in flight (not ended), by project. */
  #live(project?: string): Tracked[] {
    return [...this.#tracked.values()].filter((t) => !t.done && (project === undefined || t.req.project === project));
  }

  /** Starts watching (the first list adopts running Pods) and the pending-timeout sweep. */
  async adopt(): Promise<void> {
    const namespaces = this.#o.watchNamespaces.length ? this.#o.watchNamespaces : [undefined];
    for (const ns of namespaces) this.#informers.push(this.#informer(ns));
    await Promise.all(this.#informers.map((i) => i.start()));
    const adopted = this.#live().length;
    if (adopted) this.#o.logger.info({ pods: adopted }, "adopted the agent Pods in flight");
    const every = Math.min(5000, Math.max(100, Math.floor(this.#pendingMs / 4)));
    this.#sweeper = setInterval(() => this.#sweep(), every);
  }

  #informer(namespace: string | undefined): PodInformer {
    const { core, kc } = this.#o.clients;
    const path = namespace ? `/api/v1/namespaces/${namespace}/pods` : "/api/v1/pods";
    const list = (): Promise<KubernetesListObject<V1Pod>> =>
      namespace
        ? core.listNamespacedPod({ namespace, labelSelector: AGENT_SELECTOR })
        : core.listPodForAllNamespaces({ labelSelector: AGENT_SELECTOR });
    const informer = makeInformer(kc, path, list, AGENT_SELECTOR);
    informer.on("add", (pod) => this.#observe(pod));
    informer.on("update", (pod) => this.#observe(pod));
    informer.on("delete", (pod) => this.#vanished(pod));
    informer.on("error", (err: unknown) => {
      if (this.#stopped) return;
      this.#o.logger.warn({ err: apiMessage(err), namespace }, "agent Pod watch failed; starting it again");
      setTimeout(() => void (this.#stopped ? undefined : informer.start().catch(() => undefined)), INFORMER_RESTART_MS).unref();
    });
    return informer;
  }

  async launch(req: LaunchRequest): Promise<void> {
    const name = podNameFor(req.jobId, req.attempt);
    if (this.#live(req.project).length >= this.#o.settings.maxPodsPerProject) {
      this.#o.events.launchFailed(
        req,
        `project ${req.project} has ${this.#o.settings.maxPodsPerProject} agent Pods (maxPodsPerProject)`,
        RETRY_MS,
      );
      return;
    }
    const { token, ...dispatch } = req;
    const tracked: Tracked = { req: dispatch, namespace: undefined, since: Date.now(), done: false };
    this.#tracked.set(name, tracked);
    let created: V1Pod | undefined;
    try {
      const owner = await this.#o.owners.ownerOf(req.runId);
      tracked.namespace = owner.namespace;
      await this.#o.networkPolicies?.ensure(owner.namespace);
      const pod = agentPod({ req, owner, settings: this.#o.settings, serverUrl: this.#o.serverUrl, launchedBy: this.#o.identity });
      created = await this.#o.clients.core.createNamespacedPod({ namespace: owner.namespace, body: pod });
      await this.#o.clients.core.createNamespacedSecret({ namespace: owner.namespace, body: tokenSecret(created, token) });
      this.#o.logger.info(
        { pod: name, namespace: owner.namespace, jobId: req.jobId, runId: req.runId, attempt: req.attempt },
        "agent Pod created",
      );
    } catch (err) {
      if (tracked.done) return; // its Pod was seen to end meanwhile: reported already
      tracked.done = true;
      if (created) await this.#delete(name, tracked.namespace);
      this.#forget(name, tracked);
      this.#launchRefused(req, err);
    }
  }

  /** No agent started for `req`: its job goes back, with why (a NetworkPolicy that could not be ensured is told to the run). */
  #launchRefused(req: LaunchRequest, err: unknown): void {
    if (err instanceof AgentNetworkPolicyError) this.#o.events.launchFailed(req, err.message, NETWORK_POLICY_RETRY_MS, { tellRun: true });
    else this.#o.events.launchFailed(req, `could not create the agent Pod: ${apiMessage(err)}`, RETRY_MS);
    this.#o.events.slotFreed();
  }

  /** A Pod seen in a list or watch event. */
  #observe(pod: V1Pod): void {
    const name = pod.metadata?.name;
    if (!name || !pod.metadata || this.#stopped) return;
    const tracked = this.#tracked.get(name) ?? this.#adoptPod(name, pod);
    if (!tracked || tracked.done) return;
    tracked.namespace = pod.metadata.namespace ?? tracked.namespace;
    this.#judge(name, tracked, pod);
  }

  /** Ended, cannot start, or Pending for too long: acts on it; otherwise nothing. */
  #judge(name: string, tracked: Tracked, pod: V1Pod): void {
    const s = podState(pod);
    if (s.state === "ended") this.#ended(name, tracked, s.exitCode, s.reason);
    else if (s.state === "cannotStart") this.#cannotStart(name, tracked, s.reason);
    else if (s.state === "pending" && !s.scheduled && Date.now() - Math.min(s.since, tracked.since) > this.#pendingMs)
      this.#cannotStart(name, tracked, s.unschedulable ?? `not scheduled after ${this.#pendingMs / 1000} s`);
  }

  /** A Pod this launcher did not make (a previous controller did): tracked from its labels. */
  #adoptPod(name: string, pod: V1Pod): Tracked | undefined {
    if (pod.metadata?.deletionTimestamp) return undefined;
    const req = dispatchOf(pod);
    if (!req) return undefined;
    const tracked: Tracked = { req, namespace: pod.metadata?.namespace, since: Date.now(), done: false };
    this.#tracked.set(name, tracked);
    this.#o.logger.info({ pod: name, jobId: req.jobId, attempt: req.attempt }, "adopted an agent Pod");
    return tracked;
  }

  /** The agent ended: its job is requeued if it did not finish it; the Pod goes. */
  #ended(name: string, t: Tracked, exitCode: number | null, reason: string): void {
    t.done = true;
    this.#o.logger.info({ pod: name, jobId: t.req.jobId, exitCode, reason }, "agent Pod ended");
    this.#o.events.agentExited({ ...t.req, token: "" }, exitCode, reason);
    this.#o.events.slotFreed();
    void this.#delete(name, t.namespace);
  }

  /** The agent never started: the Pod goes and the job is given back without spending an attempt. */
  #cannotStart(name: string, t: Tracked, reason: string): void {
    t.done = true;
    this.#o.logger.warn({ pod: name, jobId: t.req.jobId, reason }, "agent Pod did not start; giving its job back");
    void this.#delete(name, t.namespace).finally(() => {
      this.#o.events.launchFailed({ ...t.req, token: "" }, reason, RETRY_MS);
      this.#o.events.slotFreed();
    });
  }

  /** A Pod deleted by someone else (or gone with its node): its agent is dead. */
  #vanished(pod: V1Pod): void {
    const name = pod.metadata?.name;
    const t = name ? this.#tracked.get(name) : undefined;
    if (!name || !t || this.#stopped) return;
    this.#forget(name, t);
    if (t.done) return;
    t.done = true;
    this.#o.logger.warn({ pod: name, jobId: t.req.jobId }, "agent Pod vanished");
    this.#o.events.agentExited({ ...t.req, token: "" }, null, "PodDeleted");
    this.#o.events.slotFreed();
  }

  /**
   * Pods that stay Pending get no event: look at them against the timeout. An ended dispatch is
   * kept (so a late event does not adopt its Pod again) until its Pod is gone from the cache.
   */
  #sweep(): void {
    const seen = new Set<string>();
    for (const pod of this.#informers.flatMap((i) => i.list())) {
      const name = pod.metadata?.name ?? "";
      seen.add(name);
      if (this.#tracked.get(name)?.done === false && podState(pod).state === "pending") this.#observe(pod);
    }
    for (const [name, t] of this.#tracked) if (!seen.has(name)) this.#sweepUnseen(name, t);
  }

  /** A dispatch whose Pod is not in the cache: one that never appeared times out; an ended one is forgotten. */
  #sweepUnseen(name: string, t: Tracked): void {
    const age = Date.now() - t.since;
    if (!t.done && t.namespace && age > this.#pendingMs * 2) this.#cannotStart(name, t, "the Pod never appeared");
    else if (t.done && age > this.#pendingMs) this.#forget(name, t);
  }

  #forget(name: string, t: Tracked): void {
    if (this.#tracked.get(name) === t) this.#tracked.delete(name);
  }

  async #delete(name: string, namespace: string | undefined): Promise<void> {
    if (!namespace) return;
    try {
      await this.#o.clients.core.deleteNamespacedPod({ name, namespace, propagationPolicy: "Background" });
    } catch (err) {
      if (apiStatus(err) !== 404) this.#o.logger.error({ pod: name, namespace, err: apiMessage(err) }, "could not delete an agent Pod");
    }
  }

  /** Stops watching. Pods are left to their jobs: a successor adopts them. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#sweeper);
    await Promise.all(this.#informers.map((i) => i.stop()));
  }
}
