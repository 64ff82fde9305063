import type { Pool } from "pg";
import type { AccountProvidersConfig, ResourceStore } from "@flowsvc/core";
import type { DispatchSlots, Keyring, Listener, ServiceMetrics } from "@flowsvc/store";
import type { LocalAgentInfo } from "@flowsvc/controller";
import type { RunMaskers } from "./run-masker.js";
import type { LogLineIndexes } from "./log-lines.js";
import type { HookFront } from "./hook-front.js";
import type { JournalFront } from "./journal-front.js";

/** What the HTTP layer needs from the rest of the service; built once by the server. */
export interface IngestDeps {
  pool: Pool;
  keyring: Keyring;
  /** Where handler, event-hook and secret writes go (core's port): Postgres in local mode, the custom resources in kubernetes mode. */
  resources: ResourceStore;
  listener: Listener;
  /** FLOWSVC_PUBLIC_URL: when set, lifecycle events carry run_url. */
  publicUrl: string | undefined;
  /** How long an agent's job lease lasts without a heartbeat. */
  leaseMs: number;
  /** The process's metrics, shared with its dispatcher in `flow server`; unset: the app makes its own. */
  metrics?: ServiceMetrics;
  /**
   * Whether the app answers `GET /metrics` (default true: `flow server`'s one port). flowsvc-ingest
   * sets false and serves `metrics` on FLOWSVC_METRICS_PORT instead, off the port its Ingress exposes.
   */
  metricsRoute?: boolean;
  /** `flow server`'s local agent processes (its launchers), for `GET /api/v1/agents`; unset where there are none. */
  localAgents?: () => readonly LocalAgentView[];
  /**
   * `flow server`'s dispatcher, once it runs: an emit hands the jobs of the handler runs it starts
   * to its free agents in the emit's own statement (store's emitToHandlers). Unset, or answering
   * undefined: the jobs are queued for whichever dispatcher claims them.
   */
  dispatchSlots?: () => DispatchSlots | undefined;
  /** Connected-account providers (core's parsed config); absent or empty: connecting is not offered. */
  accounts?: AccountProvidersConfig;
}

/** A local agent process as its launcher reports it (controller's LocalLauncher.agents()). */
export type LocalAgentView = Pick<LocalAgentInfo, "id" | "pid" | "capabilities" | "status" | "jobId">;

/** What the routes get: the service's deps and what the app builds once for all of them. */
export interface RouteDeps extends IngestDeps {
  /** The projects' maskers, cached per app (run-masker.ts). */
  maskers: RunMaskers;
  metrics: ServiceMetrics;
  /** Where each line of recently read run logs starts, cached per app (log-lines.ts). */
  logLines: LogLineIndexes;
  /** Where the hook route installs its serving code for plain deliveries from a socket (hook-front.ts); unset: Fastify serves them all. */
  hookFront?: HookFront;
  /** Where the journal route installs its serving code for plain step records from a socket (journal-front.ts); unset: Fastify serves them all. */
  journalFront?: JournalFront;
}
