/**
 * Worker mode (FLOW_AGENT_MODE=worker): one agent process runs many jobs, one at a time, for the
 * local launcher (controller/src/local-launcher.ts), so a job does not pay for starting Node and
 * loading the agent (about 450 ms on a small machine). A Pod runs the one-job mode instead.
 *
 * Each job is what a one-job agent would run: its own AgentApiClient (its own token), its own
 * logger child (agentId, jobId, runId), its own stop signal and its own working directory. runJob
 * keeps nothing between jobs: no listener on `process`, no module cache, no env change, no chdir;
 * secrets and masks live only in the claim of the job that got them.
 *
 * IPC protocol (Node's `ipc` channel; docs/internals.md, "Local agents"):
 * - launcher -> worker: `{type: "job", jobId, runId, attempt, token, agentId, workdir}`, only to a
 *   worker that runs no job (one just spawned too: Node queues the message until it listens);
 * - worker -> launcher: `{type: "ready"}` once it listens; `{type: "group", jobId, pgid}` when the
 *   job's script (or command) started in process group `pgid` (the launcher ends that group if the
 *   worker dies before `done`); `{type: "done", jobId, outcome}` when a job settled and the worker
 *   takes the next one.
 * Endings: a stop (SIGTERM, SIGINT, SIGHUP) ends the current job by its stop path (script ended,
 * no finish), sends no `done`, exit 0; the launcher requeues the job. The launcher gone (the server
 * died: the channel closed) takes no new job but lets the current one run on, as a one-job agent
 * would: its calls retry until the server is back; then exit 0. runJob
 * rejected (an agent failure, its state may be bad): logged, exit 1. A message that does not parse,
 * or a job while one runs: a launcher bug, so not ignored: logged (never the message itself, it
 * holds a token), the current job stopped, exit 2; the launcher requeues what the worker held.
 */
import { rmdirSync } from "node:fs";
import { rm } from "node:fs/promises";
import { FlowError, WorkerJobSchema, describeIssues, type WorkerJob, type WorkerReply } from "@flowsvc/core";
import { AgentApiClient, newAgentApiDispatcher } from "./agent-api-client.js";
import type { AgentBackend } from "./backend.js";
import type { WorkerAgentConfig } from "./config.js";
import { agentJobOptions, deferred, outcomeFields } from "./job-kit.js";
import type { JobOutcome, JobTimings } from "./job-kit.js";
import type { Logger } from "./logger.js";
import { runJob } from "./run-job.js";
import { ScriptSpawner } from "./script-spawner.js";

export type { WorkerJob, WorkerReply } from "@flowsvc/core";

/** The IPC channel to the launcher (main.ts wraps `process.send` and `process.on("message")`). */
export interface WorkerChannel {
  send(message: WorkerReply): void;
  onMessage(listener: (message: unknown) => void): void;
  /** The launcher went away (the channel closed). */
  onDisconnect(listener: () => void): void;
}

export interface WorkerOptions {
  readonly config: WorkerAgentConfig;
  readonly channel: WorkerChannel;
  readonly logger: Logger;
  /** FLOW_AGENT_PID of every script this worker runs. */
  readonly agentPid: number;
  /** The backend of one job; by default the agent API over HTTP with the job's token. */
  readonly backendFor?: (job: WorkerJob, logger: Logger) => AgentBackend;
  readonly timings?: Partial<JobTimings>;
}

/**
 * The job's directory, gone: one rmdir when the job left it empty (its scratch files remove
 * themselves), else (the script left files, or the job never made it) the recursive removal. The
 * rmdir is synchronous (one system call, no thread-pool round trip before the agent says it is
 * free: scratch-dir.ts says why); a directory of unknown size is removed without blocking.
 */
const removeJobDir = async (dir: string): Promise<void> => {
  try {
    rmdirSync(dir);
  } catch {
    await rm(dir, { recursive: true, force: true });
  }
};

export const WORKER_EXIT = { stopped: 0, agentFailure: 1, protocolError: 2 } as const;

export interface AgentWorker {
  /** Ends the current job by its stop path (if one runs), then the worker ends with 0 (SIGTERM). */
  stop(reason: string): void;
  /** The worker's exit status once it is over (WORKER_EXIT). */
  readonly exited: Promise<number>;
}

export const startWorker = (options: WorkerOptions): AgentWorker => {
  const { config, channel, logger } = options;
  const exit = deferred<number>();
  let current: { readonly job: WorkerJob; readonly stop: AbortController } | undefined;
  let ending: number | undefined;
  // One connection pool for every job: a job's calls go over a kept-alive connection instead of
  // a new TCP connection (and a server accept) per job. Each request carries its own job's token;
  // a job's client closing aborts its own calls only. Made on the first job (tests give backendFor).
  let dispatcher: ReturnType<typeof newAgentApiDispatcher> | undefined;
  // The scripts' spawner (script-spawner.ts), made at the first script job; null: none on this host.
  let spawner: ScriptSpawner | null | undefined;
  const scriptSpawner = (): ScriptSpawner | undefined => {
    if (config.spawner === false) return undefined;
    spawner ??= ScriptSpawner.create() ?? null;
    return spawner ?? undefined;
  };

  /**
   * Takes no more jobs and exits with `code` once the current job (if any) settled; `stopJob`
   * sends that job down its stop path. The first code wins; a later stop still stops the job.
   */
  const end = (code: number, reason: string, stopJob: boolean): void => {
    const first = ending === undefined;
    ending ??= code;
    if (!current) {
      if (first) logger.info({ reason }, "worker stopping");
      exit.resolve(ending);
      return;
    }
    if (stopJob && !current.stop.signal.aborted) {
      logger.info({ reason, jobId: current.job.jobId }, "worker stopping: the script is ended and the job is left to the launcher");
      current.stop.abort(new FlowError("unavailable", "the agent is stopping"));
    } else if (first) {
      logger.info({ reason, jobId: current.job.jobId }, "worker ending after its current job");
    }
  };

  const runOne = async (job: WorkerJob, stop: AbortController): Promise<void> => {
    const log = logger.child({ agentId: job.agentId, jobId: job.jobId, runId: job.runId, attempt: job.attempt });
    log.info({ workdir: job.workdir }, "job assigned");
    let outcome: JobOutcome;
    try {
      const backend =
        options.backendFor?.(job, log) ??
        new AgentApiClient({
          serverUrl: config.serverUrl,
          token: job.token,
          logger: log,
          dispatcher: (dispatcher ??= newAgentApiDispatcher()),
        });
      outcome = await runJob(
        backend,
        // The job's directory is named for this dispatch alone: its files go there directly. The
        // launcher learns the script's group over IPC (no file the script could rewrite).
        {
          ...agentJobOptions(config, job, { logger: log, stop: stop.signal, agentPid: options.agentPid, timings: options.timings }),
          ownsWorkdir: true,
          onGroup: (pgid) => channel.send({ type: "group", jobId: job.jobId, pgid }),
          spawner: scriptSpawner,
        },
      );
    } catch (err) {
      log.error({ err }, "agent failed");
      exit.resolve(WORKER_EXIT.agentFailure);
      return;
    }
    log.info(outcomeFields(outcome), "job done");
    // The job's directory is this agent user's: removing it here spares the launcher starting a
    // process to do it (it only checks that nothing is left, and removes what is).
    await removeJobDir(job.workdir).catch((err: unknown) => log.warn({ err }, "could not remove the job's directory"));
    current = undefined;
    if (ending !== undefined) exit.resolve(ending);
    else channel.send({ type: "done", jobId: job.jobId, outcome: outcome.type });
  };

  channel.onMessage((message) => {
    if (ending !== undefined) return; // on the way out: the launcher requeues what it sent
    const parsed = WorkerJobSchema.safeParse(message);
    if (!parsed.success) {
      logger.error({ problems: describeIssues(parsed.error.issues) }, "invalid message from the launcher; the worker exits");
      end(WORKER_EXIT.protocolError, "invalid message", true);
      return;
    }
    if (current) {
      logger.error({ jobId: parsed.data.jobId, running: current.job.jobId }, "a job came while another runs; the worker exits");
      end(WORKER_EXIT.protocolError, "a second job", true);
      return;
    }
    const stop = new AbortController();
    current = { job: parsed.data, stop };
    void runOne(parsed.data, stop);
  });
  // The server died: a one-job agent would run its job on (its calls retry until the server is
  // back), so this one does too; nobody is left to give it another.
  channel.onDisconnect(() => end(WORKER_EXIT.stopped, "the launcher went away", false));
  channel.send({ type: "ready" });
  logger.info({}, "worker ready");
  // Nothing runs once the worker is over: its connections go too (main.ts exits anyway; a test may not).
  const exited = exit.promise.then(async (code) => {
    await dispatcher?.destroy().catch(() => undefined);
    await spawner?.close();
    return code;
  });
  return { stop: (reason) => end(WORKER_EXIT.stopped, reason, true), exited };
};
