/**
 * The agent NetworkPolicy (contract "Agent Pods' network"): before the first agent Pod of a
 * namespace, the launcher makes sure the NetworkPolicy `flowsvc-agent` there has exactly the
 * configured spec (the config file's agentNetworkPolicy) and our labels. The controller is its only
 * owner: the chart renders the spec into the config, never the object.
 *
 * At a namespace's first launch, again at the first launch after AGENT_NETWORK_POLICY_RECHECK_MS
 * since its last check (someone may have deleted or loosened it meanwhile: a controller keeps what
 * it owns), again when the spec changes, and again after any error: read it; create it when absent
 * (409: a racing replica made it, read again); replace it,
 * with the resourceVersion read, when its spec or labels differ (an operator's edit, an older
 * version's spec; 409: read again). Replicas doing this at once converge on the same object: each
 * writes only a difference, and a conflict is settled by reading again, a bounded number of times.
 * A failure (403 from RBAC, any API error) rejects with an AgentNetworkPolicyError, and the launcher
 * makes no Pod there (fail closed).
 */
import { createHash } from "node:crypto";
import type { NetworkingV1Api, V1NetworkPolicy } from "@kubernetes/client-node";
import type { AgentNetworkPolicySpec } from "../agent-network-policy-spec.js";
import type { ControllerLogger } from "../dispatcher.js";
import { apiMessage, apiStatus } from "./client.js";

export const AGENT_NETWORK_POLICY_NAME = "flowsvc-agent";
/** Its labels (`kubectl delete networkpolicy -A -l app.kubernetes.io/managed-by=flowsvc` removes them all). */
export const AGENT_NETWORK_POLICY_LABELS = {
  "app.kubernetes.io/name": "flowsvc",
  "app.kubernetes.io/component": "agent",
  "app.kubernetes.io/managed-by": "flowsvc",
} as const;

/** How long a check holds: the first launch in a namespace after it reads the policy again (and makes it again, or puts its spec back). */
export const AGENT_NETWORK_POLICY_RECHECK_MS = 30_000;

/** Reads and writes before a namespace that keeps changing under us is given up on (for this launch). */
const MAX_TRIES = 5;

export class AgentNetworkPolicyError extends Error {
  constructor(
    readonly namespace: string,
    cause: string,
  ) {
    super(
      `the agent NetworkPolicy ${AGENT_NETWORK_POLICY_NAME} could not be ensured in namespace ${namespace} (${cause}), so no agent Pod is made there: ` +
        `give the controller get, create and update on networkpolicies (networking.k8s.io) in that namespace (the chart's RBAC does), ` +
        `or turn the policy off (agent.networkPolicy.enabled=false)`,
    );
    this.name = "AgentNetworkPolicyError";
  }
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** A NetworkPolicyPort with the protocol the API server defaults (TCP). */
const withProtocol = (port: unknown): unknown => {
  const p = { ...(port as Record<string, unknown>) };
  p["protocol"] ??= "TCP";
  return p;
};

/**
 * A spec as the API server keeps it, for comparing: absent, null and empty lists and label maps
 * dropped (the server omits them), a port's protocol defaulted to TCP, object keys sorted.
 */
export const canonicalSpec = (value: unknown, key = ""): Json | undefined => {
  if (value === null || value === undefined) return undefined;
  if (Array.isArray(value)) {
    const items = value.map((v) => canonicalSpec(key === "ports" ? withProtocol(v) : v)).filter((v) => v !== undefined);
    return items.length ? items : undefined;
  }
  if (typeof value !== "object") return value as Json;
  const out: Record<string, Json> = {};
  for (const k of Object.keys(value).sort()) {
    const v = canonicalSpec((value as Record<string, unknown>)[k], k);
    if (v !== undefined) out[k] = v;
  }
  if (key === "matchLabels" && Object.keys(out).length === 0) return undefined;
  return out;
};

const same = (a: unknown, b: unknown): boolean => JSON.stringify(canonicalSpec(a)) === JSON.stringify(canonicalSpec(b));

const hasOurLabels = (policy: V1NetworkPolicy): boolean =>
  Object.entries(AGENT_NETWORK_POLICY_LABELS).every(([k, v]) => policy.metadata?.labels?.[k] === v);

export interface AgentNetworkPoliciesOptions {
  networking: NetworkingV1Api;
  spec: AgentNetworkPolicySpec;
  logger: ControllerLogger;
  /** How long a check holds (AGENT_NETWORK_POLICY_RECHECK_MS). */
  recheckMs?: number;
  /** The clock, in ms (Date.now); tests move it. */
  now?: () => number;
}

export class AgentNetworkPolicies {
  readonly #o: AgentNetworkPoliciesOptions;
  readonly #hash: string;
  readonly #recheckMs: number;
  readonly #now: () => number;
  /** Namespace -> the hash of the spec its policy was last seen or made with, and when (the check's start). */
  readonly #ensured = new Map<string, { hash: string; at: number }>();
  /** One check at a time per namespace: concurrent launches there wait for it. */
  readonly #checking = new Map<string, Promise<void>>();

  constructor(opts: AgentNetworkPoliciesOptions) {
    this.#o = opts;
    this.#recheckMs = opts.recheckMs ?? AGENT_NETWORK_POLICY_RECHECK_MS;
    this.#now = opts.now ?? Date.now;
    this.#hash = createHash("sha256")
      .update(JSON.stringify([canonicalSpec(opts.spec), AGENT_NETWORK_POLICY_LABELS]))
      .digest("hex");
  }

  /** Resolves once the namespace's policy is as configured; rejects with an AgentNetworkPolicyError otherwise. */
  ensure(namespace: string): Promise<void> {
    const last = this.#ensured.get(namespace);
    if (last?.hash === this.#hash && this.#now() - last.at < this.#recheckMs) return Promise.resolve();
    let checking = this.#checking.get(namespace);
    if (!checking) {
      checking = this.#check(namespace).finally(() => this.#checking.delete(namespace));
      this.#checking.set(namespace, checking);
    }
    return checking;
  }

  async #check(namespace: string): Promise<void> {
    const at = this.#now();
    try {
      await this.#converge(namespace);
      this.#ensured.set(namespace, { hash: this.#hash, at });
    } catch (err) {
      this.#ensured.delete(namespace);
      const cause = apiMessage(err);
      const failure = new AgentNetworkPolicyError(namespace, cause);
      this.#o.logger.error({ namespace, err: cause }, failure.message);
      throw failure;
    }
  }

  async #converge(namespace: string): Promise<void> {
    const api = this.#o.networking;
    const name = AGENT_NETWORK_POLICY_NAME;
    for (let tries = 0; tries < MAX_TRIES; tries++) {
      const current = await api.readNamespacedNetworkPolicy({ name, namespace }).catch((err: unknown) => {
        if (apiStatus(err) === 404) return undefined;
        throw err;
      });
      if (current && same(current.spec, this.#o.spec) && hasOurLabels(current)) return;
      const written = current ? await this.#replace(namespace, current) : await this.#create(namespace);
      if (written) return;
    }
    throw new Error(`it kept changing: ${MAX_TRIES} reads and writes did not settle it`);
  }

  /** Creates it; false when another writer made it first (409: read again). */
  async #create(namespace: string): Promise<boolean> {
    const body: V1NetworkPolicy = {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: AGENT_NETWORK_POLICY_NAME, namespace, labels: { ...AGENT_NETWORK_POLICY_LABELS } },
      spec: this.#o.spec,
    };
    try {
      await this.#o.networking.createNamespacedNetworkPolicy({ namespace, body });
    } catch (err) {
      if (apiStatus(err) === 409) return false;
      throw err;
    }
    this.#o.logger.info({ namespace, networkPolicy: AGENT_NETWORK_POLICY_NAME }, "agent NetworkPolicy created");
    return true;
  }

  /** Puts the configured spec and our labels back, over the version read; false when it changed meanwhile (409, or 404: gone). */
  async #replace(namespace: string, current: V1NetworkPolicy): Promise<boolean> {
    const meta = current.metadata ?? {};
    const body: V1NetworkPolicy = {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: {
        name: AGENT_NETWORK_POLICY_NAME,
        namespace,
        ...(meta.resourceVersion ? { resourceVersion: meta.resourceVersion } : {}),
        labels: { ...meta.labels, ...AGENT_NETWORK_POLICY_LABELS },
        ...(meta.annotations ? { annotations: meta.annotations } : {}),
      },
      spec: this.#o.spec,
    };
    try {
      await this.#o.networking.replaceNamespacedNetworkPolicy({ name: AGENT_NETWORK_POLICY_NAME, namespace, body });
    } catch (err) {
      const status = apiStatus(err);
      if (status === 409 || status === 404) return false;
      throw err;
    }
    this.#o.logger.warn(
      { namespace, networkPolicy: AGENT_NETWORK_POLICY_NAME },
      "agent NetworkPolicy differed from the configured one; put it back",
    );
    return true;
  }
}
