/**
 * What the two kinds of job (a script, an activity child) share while they run: the options the
 * caller gave runJob, the outcome types, timings, and the job's scope (the backend watched for a
 * lost lease, the signals that end it).
 */
import { FlowError, isPassthroughVar } from "@flowsvc/core";
import type { AgentBackend } from "./backend.js";
import type { AgentConfig } from "./config.js";
import type { Logger } from "./logger.js";
import type { ScriptSpawner } from "./script-spawner.js";

export type JobOutcome =
  | { readonly type: "finished"; readonly exitCode: number; readonly status: string | undefined }
  /** A durable call parked the run: the script was ended and the job suspended (no finish). */
  | { readonly type: "suspended"; readonly status: "parked" | "requeued" }
  | { readonly type: "lost" }
  | { readonly type: "stopped" }
  | { readonly type: "not_claimed"; readonly reason: string };

export interface JobTimings {
  /** SIGTERM to SIGKILL for the script's group (under the launcher's own grace for the agent). */
  readonly killGraceMs: number;
  /** How long output may keep draining after the script ended. */
  readonly drainMs: number;
  readonly logIntervalMs: number;
}

export const DEFAULT_TIMINGS: JobTimings = { killGraceMs: 3_000, drainMs: 1_000, logIntervalMs: 50 };

/** How to run one job; main.ts fills it from AgentConfig, the local engine (`flow run`) from its own. */
export interface JobOptions {
  readonly agentId: string;
  /** Sent with the claim: the capabilities this agent offers (`--requires` of activities). */
  readonly capabilities: readonly string[];
  /** The agent's working directory: job scratch directories are made here, activity commands run here. */
  readonly workdir: string;
  /** Directory holding the in-script `flow` client, put first on PATH. */
  readonly clientDir: string | undefined;
  /** The agent's own environment: scripts and activities get only its passthrough part (and PATH). */
  readonly agentEnv: Readonly<Record<string, string | undefined>>;
  readonly logger: Logger;
  /** Aborted when the agent must stop (SIGTERM): end the script, do not finish the job. */
  readonly stop: AbortSignal;
  /** FLOW_AGENT_PID of the script. */
  readonly agentPid: number;
  /**
   * The working directory of the script or activity command. Unset: a script runs in its job's
   * scratch directory, an activity in `workdir`. `flow run` passes the directory it was run in.
   */
  readonly cwd?: string;
  /**
   * The script file to run instead of the scratch copy of the claim's source (`flow run` executes
   * the user's file in place). The scratch directory is still made for the socket, the capture
   * pipe and FLOW_INPUT_FILE.
   */
  readonly scriptPath?: string;
  /**
   * `workdir` belongs to this job alone: it does not exist yet, the job makes it and puts its
   * scratch files there directly, and the caller removes it after the job (a worker's job directory).
   */
  readonly ownsWorkdir?: boolean;
  /** Where to write the script's process-group id (`flow run`'s exit guard reads it; unset: not written). */
  readonly pgidFile?: string;
  /** Told the process-group id of the script (or command) once it started: a worker tells its launcher. */
  readonly onGroup?: (pgid: number) => void;
  /** A worker's script spawner (script-spawner.ts), made at its first script; undefined: Node's spawn. */
  readonly spawner?: () => ScriptSpawner | undefined;
  readonly timings?: Partial<JobTimings>;
}

/**
 * The part of an agent's environment its jobs can see: scripts and activity commands take only the
 * passthrough variables and PATH from it (core's composeScriptEnv, composeActivityEnv), so a
 * worker filters it once instead of walking the whole environment (often 50+ variables) per job.
 */
const jobVisibleEnv = new WeakMap<object, Readonly<Record<string, string | undefined>>>();
const visibleEnvOf = (agentEnv: Readonly<Record<string, string | undefined>>): Readonly<Record<string, string | undefined>> => {
  let visible = jobVisibleEnv.get(agentEnv);
  if (!visible) {
    const kept = new Map<string, string>();
    for (const [name, value] of Object.entries(agentEnv))
      if (value !== undefined && (name === "PATH" || isPassthroughVar(name))) kept.set(name, value);
    visible = Object.fromEntries(kept);
    jobVisibleEnv.set(agentEnv, visible);
  }
  return visible;
};

/** JobOptions for a job of an agent process, one-job or worker: the agent's configuration, the job's id and working directory. */
export const agentJobOptions = (
  config: Pick<AgentConfig, "capabilities" | "clientDir" | "agentEnv">,
  job: { readonly agentId: string; readonly workdir: string },
  agent: {
    readonly logger: Logger;
    readonly stop: AbortSignal;
    readonly agentPid: number;
    readonly timings?: Partial<JobTimings> | undefined;
  },
): JobOptions => ({
  agentId: job.agentId,
  capabilities: config.capabilities,
  workdir: job.workdir,
  clientDir: config.clientDir,
  agentEnv: visibleEnvOf(config.agentEnv),
  logger: agent.logger,
  stop: agent.stop,
  agentPid: agent.agentPid,
  ...(agent.timings ? { timings: agent.timings } : {}),
});

/** The fields of a job's last log line. */
export const outcomeFields = (outcome: JobOutcome): Record<string, unknown> => ({
  outcome: outcome.type,
  ...(outcome.type === "finished" ? { exitCode: outcome.exitCode } : {}),
});

export interface Deferred<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
  readonly settled: () => T | undefined;
}

export const deferred = <T>(): Deferred<T> => {
  let value: T | undefined;
  let resolve: (v: T) => void = () => undefined;
  const promise = new Promise<T>((r) => (resolve = r));
  return {
    promise,
    resolve: (v) => {
      value ??= v;
      resolve(v);
    },
    settled: () => value,
  };
};

export const whenAborted = (signal: AbortSignal): Promise<void> =>
  signal.aborted ? Promise.resolve() : new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));

export const isCode = (err: unknown, code: string): boolean => err instanceof FlowError && err.code === code;

/** One claimed job while it runs. */
export interface JobScope {
  readonly options: JobOptions;
  readonly logger: Logger;
  /** The caller's backend, watched: a `job_lost` from any call settles `lost`. */
  readonly backend: AgentBackend;
  readonly timings: JobTimings;
  /** Settles when the lease is gone (another agent may hold the job now): end the work, send nothing. */
  readonly lost: Deferred<FlowError>;
  /** Aborted when the job is lost or the agent stops: queued log text is dropped. */
  readonly jobAbort: AbortSignal;
  /** Ends everything still being sent (log batches, retried calls): the agent is stopping or the job is lost. */
  readonly cut: () => void;
}

/** The backend, with every call's `job_lost` reported to `onLost` (and still thrown to the caller). */
export const watchLease = (backend: AgentBackend, onLost: (err: FlowError) => void): AgentBackend => {
  const watch = async <T>(call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (err) {
      if (err instanceof FlowError && err.code === "job_lost") onLost(err);
      throw err;
    }
  };
  return {
    claim: (body) => backend.claim(body),
    heartbeat: () => watch(() => backend.heartbeat()),
    record: (body) => watch(() => backend.record(body)),
    call: (body) => watch(() => backend.call(body)),
    suspend: () => watch(() => backend.suspend()),
    state: (body) => watch(() => backend.state(body)),
    log: (chunks) => watch(() => backend.log(chunks)),
    annotate: (markdown) => watch(() => backend.annotate(markdown)),
    finish: (body) => watch(() => backend.finish(body)),
    finishActivity: (body) => watch(() => backend.finishActivity(body)),
    close: () => backend.close(),
  };
};
