/**
 * The service's Prometheus metrics (issue 15, item 6): one registry per process, built once by the
 * composition root (`flow server`, flowsvc-ingest, flowsvc-controller) and handed to the parts that
 * count. Scraped at `GET /metrics` (ingest's port; the controller's health port in Kubernetes).
 *
 * Label values are bounded enums only: a status, a route's template (never the URL), an error code,
 * a refusal reason from a fixed list, an agent pool's configured capabilities. Nothing a sender
 * controls (a hook's name, a run id, a header) ever becomes a label value, and no value of a run
 * (its output, env or secrets) is ever read here.
 *
 * What Postgres knows (runs by status, the queue) is read by one query per scrape, at most every
 * `cacheMs` (5 s): several scrapers or replicas cost Postgres one grouped count each, not one per
 * series.
 */
import { RUN_STATUSES } from "@flowsvc/core";
import type { Pool } from "pg";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** The run statuses every scrape reports (0 when none), so a series never disappears. */

/** Why a hook delivery was refused: a fixed list; anything else is counted as its error code. */
export const HOOK_REFUSAL_REASONS = ["no_secret", "wrong_secret", "no_signature", "bad_signature"] as const;
export type HookRefusalReason = (typeof HOOK_REFUSAL_REASONS)[number];

/** The error codes of core/src/errors.ts a refusal can carry; an unknown one is counted as `other`. */
const ERROR_CODES = new Set([
  "invalid_argument",
  "unauthenticated",
  "permission_denied",
  "not_found",
  "conflict",
  "payload_too_large",
  "uri_too_long",
  "unavailable",
  "internal",
]);

const HTTP_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/** What an agent pool reports of its agents. */
export interface AgentPoolUsage {
  /** The pool's capabilities, as configured (`polyglot`, `gpu,linux`): the pool's label. */
  readonly capabilities: readonly string[];
  /** Agents running a job, and the most the pool runs at once. */
  usage(): { busy: number; size: number };
}

interface Snapshot {
  at: number;
  runs: Array<{ status: string; handler: boolean; n: number }>;
  queued: number;
  oldestQueuedSeconds: number;
}

/** Runs by status and by whether a handler started them; the ready queue's depth and oldest age. One round trip. */
const readSnapshot = async (pool: Pool): Promise<Omit<Snapshot, "at">> => {
  const [runs, queue] = await Promise.all([
    pool.query<{ status: string; handler: boolean; n: string }>(
      `select status, handler_name is not null as handler, count(*) as n from runs group by 1, 2`,
    ),
    pool.query<{ n: string; oldest: number | null }>(
      `select count(*) as n, extract(epoch from now() - min(not_before))::float8 as oldest
         from jobs where status = 'queued' and not_before <= now()`,
    ),
  ]);
  return {
    runs: runs.rows.map((r) => ({ status: r.status, handler: r.handler, n: Number(r.n) })),
    queued: Number(queue.rows[0]?.n ?? 0),
    oldestQueuedSeconds: Math.max(0, queue.rows[0]?.oldest ?? 0),
  };
};

export interface ServiceMetricsOptions {
  pool: Pool;
  /** How long one Postgres snapshot serves scrapes (default 5 s). */
  cacheMs?: number;
  /** Adds the process's own metrics (CPU, memory, event loop lag, GC); default true. */
  processMetrics?: boolean;
}

/** Seconds: 1 ms to 10 s, for HTTP calls, claims and steps. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class ServiceMetrics {
  readonly registry = new Registry();
  readonly #pool: Pool;
  readonly #cacheMs: number;
  #snapshot: Snapshot | undefined;
  #reading: Promise<Snapshot> | undefined;
  readonly #agentPools: AgentPoolUsage[] = [];

  readonly httpRequests: Counter<"method" | "route" | "status">;
  readonly httpSeconds: Histogram<"method" | "route">;
  readonly claimSeconds: Histogram;
  readonly stepSeconds: Histogram;
  readonly hookDeliveries: Counter<"outcome">;
  readonly hookRefusals: Counter<"reason">;
  readonly handlerDeliveries: Counter<"outcome">;

  constructor(opts: ServiceMetricsOptions) {
    this.#pool = opts.pool;
    this.#cacheMs = opts.cacheMs ?? 5_000;
    const registers = [this.registry];
    if (opts.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.httpRequests = new Counter({
      name: "flowsvc_http_requests_total",
      help: "HTTP requests answered, by method, route template (`unmatched` for no route) and status code.",
      labelNames: ["method", "route", "status"],
      registers,
    });
    this.httpSeconds = new Histogram({
      name: "flowsvc_http_request_duration_seconds",
      help: "Time to answer an HTTP request (to the last byte of a non-streamed answer), by route template.",
      labelNames: ["method", "route"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.claimSeconds = new Histogram({
      name: "flowsvc_job_claim_duration_seconds",
      help: "Time to answer an agent's claim of its job (POST /agent/v1/claim: secrets, credentials, journal, start).",
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.stepSeconds = new Histogram({
      name: "flowsvc_step_record_duration_seconds",
      help: "Time to durably record a step's completion from the agent API (POST /agent/v1/journal with kind step).",
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.hookDeliveries = new Counter({
      name: "flowsvc_hook_deliveries_total",
      help: "Event hook deliveries answered 202 (committed), by outcome: recorded, or a redelivery of an event already recorded.",
      labelNames: ["outcome"],
      registers,
    });
    this.hookRefusals = new Counter({
      name: "flowsvc_hook_refusals_total",
      help: "Event hook deliveries refused, by reason (no_secret, wrong_secret, no_signature, bad_signature) or the error code.",
      labelNames: ["reason"],
      registers,
    });
    this.handlerDeliveries = new Counter({
      name: "flowsvc_handler_deliveries_total",
      help: "Events delivered to handlers by this process's hook ingest and emit API: runs started, declined (`when` failed), dropped (cap).",
      labelNames: ["outcome"],
      registers,
    });
    this.#postgresGauges(registers);
    this.#poolGauges(registers);
  }

  /** Registers agent pools whose usage each scrape reports (the local launchers; Pods are not a pool). */
  trackAgentPools(pools: readonly AgentPoolUsage[]): void {
    this.#agentPools.push(...pools);
  }

  /** A hook delivery's refusal: a reason of the fixed list, or the refusal's error code. */
  hookRefused(reason: string): void {
    const known = (HOOK_REFUSAL_REASONS as readonly string[]).includes(reason) || ERROR_CODES.has(reason);
    this.hookRefusals.inc({ reason: known ? reason : "other" });
  }

  /** An emit's handler outcome (store's EmitResult). */
  handlersDelivered(result: { handlerRuns: readonly unknown[]; declined: readonly unknown[]; dropped: readonly unknown[] }): void {
    if (result.handlerRuns.length) this.handlerDeliveries.inc({ outcome: "started" }, result.handlerRuns.length);
    if (result.declined.length) this.handlerDeliveries.inc({ outcome: "declined" }, result.declined.length);
    if (result.dropped.length) this.handlerDeliveries.inc({ outcome: "dropped" }, result.dropped.length);
  }

  /** One answered HTTP request; `route` is the matched route's template, or undefined when none matched. */
  httpAnswered(req: { method: string; route: string | undefined; status: number; seconds: number }): void {
    const method = HTTP_METHODS.has(req.method) ? req.method : "OTHER";
    const route = req.route ?? "unmatched";
    this.httpRequests.inc({ method, route, status: String(req.status) });
    this.httpSeconds.observe({ method, route }, req.seconds);
  }

  /** The Prometheus text exposition of every metric. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The Postgres snapshot, read at most once per cacheMs however many scrapes ask. */
  async #read(): Promise<Snapshot> {
    const now = Date.now();
    if (this.#snapshot && now - this.#snapshot.at < this.#cacheMs) return this.#snapshot;
    this.#reading ??= readSnapshot(this.#pool)
      .then((s) => (this.#snapshot = { ...s, at: Date.now() }))
      .finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  #postgresGauges(registers: Registry[]): void {
    // prom-client calls collect() with the gauge as `this`; the closures keep `metrics` for the snapshot.
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- see above
    const metrics = this;
    new Gauge({
      name: "flowsvc_runs",
      help: "Runs by status, and whether a handler started them (trigger=handler) or not (trigger=other). From Postgres, cached 5 s.",
      labelNames: ["status", "trigger"],
      registers,
      async collect() {
        const { runs } = await metrics.#read();
        for (const status of RUN_STATUSES) for (const trigger of ["handler", "other"]) this.set({ status, trigger }, 0);
        for (const r of runs)
          if ((RUN_STATUSES as readonly string[]).includes(r.status))
            this.set({ status: r.status, trigger: r.handler ? "handler" : "other" }, r.n);
      },
    });
    new Gauge({
      name: "flowsvc_queue_depth",
      help: "Jobs ready to run and waiting for an agent. From Postgres, cached 5 s.",
      registers,
      async collect() {
        this.set((await metrics.#read()).queued);
      },
    });
    new Gauge({
      name: "flowsvc_queue_oldest_age_seconds",
      help: "How long the oldest ready job has waited for an agent (0 when none waits). From Postgres, cached 5 s.",
      registers,
      async collect() {
        this.set((await metrics.#read()).oldestQueuedSeconds);
      },
    });
  }

  #poolGauges(registers: Registry[]): void {
    const pool = this.#pool;
    const agentPools = this.#agentPools;
    new Gauge({
      name: "flowsvc_postgres_pool_connections",
      help: "This process's Postgres connection pool: connections open (total), idle, and callers waiting for one (waiting).",
      labelNames: ["state"],
      registers,
      collect() {
        this.set({ state: "total" }, pool.totalCount);
        this.set({ state: "idle" }, pool.idleCount);
        this.set({ state: "waiting" }, pool.waitingCount);
      },
    });
    new Gauge({
      name: "flowsvc_agents",
      help: "Local agent pools (flow server): agents running a job (busy) and free slots (idle), by pool capabilities.",
      labelNames: ["pool", "state"],
      registers,
      collect() {
        this.reset();
        for (const p of agentPools) {
          const { busy, size } = p.usage();
          const label = p.capabilities.length ? [...p.capabilities].sort().join(",") : "none";
          this.inc({ pool: label, state: "busy" }, busy);
          this.inc({ pool: label, state: "idle" }, Math.max(0, size - busy));
        }
      },
    });
  }
}
