/**
 * One job, start to end (shared/ARCHITECTURE.md, "How data flows", Execute): claim it, prepare the
 * scratch directory, start the script with its sealed environment, serve the socket, ship masked
 * output, keep the lease, and report the exit with finish.
 *
 * Endings:
 * - the script exits: leftovers of its group are ended, output is flushed, finish lands (retried);
 * - a determinism error: the group is ended and the job finishes with exit 1 and the message;
 * - the lease is lost (409 job_lost / 401): the group is ended, nothing more is sent;
 * - the agent is told to stop (SIGTERM): the group is ended, finish is NOT sent (the lease
 *   expires and the job is dispatched again, to replay).
 */
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { FlowError, composeScriptEnv, createMasker, prependPath } from "@flowsvc/core";
import type { ClaimResponse, FinishRequest } from "@flowsvc/core";
import { AgentApiClient } from "./agent-api-client.js";
import { openCapturePipe } from "./capture-pipe.js";
import type { AgentConfig } from "./config.js";
import { startHeartbeat } from "./heartbeat.js";
import { JournalCursor } from "./journal-cursor.js";
import { LogShipper } from "./log-shipper.js";
import type { Logger } from "./logger.js";
import { pumpOutput } from "./output-pump.js";
import type { ScratchDir } from "./scratch-dir.js";
import { prepareScratchDir } from "./scratch-dir.js";
import type { ScriptExit } from "./script-runner.js";
import { startScript } from "./script-runner.js";
import { createOpHandler } from "./socket-ops.js";
import { startSocketServer } from "./socket-server.js";

export type JobOutcome =
  | { readonly type: "finished"; readonly exitCode: number; readonly status: string | undefined }
  | { readonly type: "lost" }
  | { readonly type: "stopped" }
  | { readonly type: "not_claimed"; readonly reason: string };

export interface JobTimings {
  /** SIGTERM to SIGKILL for the script's group (under the launcher's own grace for the agent). */
  readonly killGraceMs: number;
  /** How long output may keep draining after the script ended. */
  readonly drainMs: number;
  readonly logIntervalMs: number;
  readonly maskIdleMs: number;
}

export interface JobDeps {
  readonly config: AgentConfig;
  readonly logger: Logger;
  /** Aborted when the agent must stop (SIGTERM): end the script, do not finish the job. */
  readonly stop: AbortSignal;
  readonly agentPid: number;
  readonly timings?: Partial<JobTimings>;
}

const DEFAULT_TIMINGS: JobTimings = { killGraceMs: 3_000, drainMs: 1_000, logIntervalMs: 50, maskIdleMs: 1_000 };

const whenAborted = (signal: AbortSignal): Promise<void> =>
  signal.aborted ? Promise.resolve() : new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));

interface Deferred<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
  readonly settled: () => T | undefined;
}

const deferred = <T>(): Deferred<T> => {
  let value: T | undefined;
  let resolve: (v: T) => void = () => undefined;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve: (v) => { value ??= v; resolve(v); }, settled: () => value };
};

const isCode = (err: unknown, code: string): boolean => err instanceof FlowError && err.code === code;

export const runJob = async (deps: JobDeps): Promise<JobOutcome> => {
  const { config, logger } = deps;
  const jobAbort = new AbortController();
  const lost = deferred<FlowError>();
  const api = new AgentApiClient({
    serverUrl: config.serverUrl, token: config.jobToken, logger, signal: jobAbort.signal,
    onJobLost: (err) => {
      lost.resolve(err);
      jobAbort.abort(err);
    },
  });
  const stopDuringClaim = () => jobAbort.abort(new FlowError("unavailable", "the agent is stopping"));
  deps.stop.addEventListener("abort", stopDuringClaim, { once: true });
  try {
    let claim: ClaimResponse;
    try {
      claim = await api.claim({ agent_id: config.agentId, capabilities: [...config.capabilities] });
    } catch (err) {
      if (deps.stop.aborted) return { type: "stopped" };
      if (isCode(err, "job_lost")) return { type: "not_claimed", reason: (err as Error).message };
      throw err;
    } finally {
      deps.stop.removeEventListener("abort", stopDuringClaim);
    }
    const log = logger.child({ runId: claim.run_id, jobId: claim.job_id, attempt: claim.attempt });
    log.info({ recorded: claim.journal.length }, "job claimed");
    const scratch = await prepareScratchDir(config.workdir, claim);
    try {
      return await executeJob({ ...deps, logger: log }, { claim, scratch, api, jobAbort, lost });
    } finally {
      await scratch.remove();
    }
  } finally {
    await api.close();
  }
};

interface JobParts {
  readonly claim: ClaimResponse;
  readonly scratch: ScratchDir;
  readonly api: AgentApiClient;
  /** Aborted when the job is lost or the agent stops: ends every retry loop. */
  readonly jobAbort: AbortController;
  readonly lost: Deferred<FlowError>;
}

const executeJob = async (deps: JobDeps, parts: JobParts): Promise<JobOutcome> => {
  const { config, logger } = deps;
  const { claim, scratch, api, jobAbort, lost } = parts;
  const t = { ...DEFAULT_TIMINGS, ...deps.timings };
  const pipe = openCapturePipe(scratch.capturePath);
  const shipper = new LogShipper({ send: (chunks) => api.log(chunks), logger, intervalMs: t.logIntervalMs, signal: jobAbort.signal });
  const outputs = new Map<string, string>();
  let failure: FlowError | undefined;
  const failed = deferred<FlowError>();
  const server = await startSocketServer(scratch.socketPath, createOpHandler({
    agentId: config.agentId, runId: claim.run_id, captureIno: pipe.ino, cursor: new JournalCursor(claim.journal), api, outputs, logger,
    failure: () => failure ?? lost.settled(),
    onDeterminism: (err) => {
      failure ??= err;
      failed.resolve(failure);
    },
  }), logger);

  const env = composeScriptEnv({
    agentEnv: config.agentEnv, claimEnv: claim.env, trigger: claim.trigger,
    flowVars: {
      FLOW_AGENT_SOCKET: scratch.socketPath, FLOW_AGENT_PID: String(deps.agentPid), FLOW_AGENT_ID: config.agentId,
      FLOW_WORKFLOW_ID: claim.run_id, FLOW_ACTIVITY_ID: claim.job_id, FLOW_INPUT_FILE: scratch.inputPath,
    },
    path: prependPath(config.clientDir, config.agentEnv["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"),
  });
  const [command = "bash", ...interpreterArgs] = claim.interpreter;
  const started = Date.now();
  const script = startScript({ command, args: [...interpreterArgs, scratch.scriptPath], cwd: scratch.dir, env, stdoutFd: pipe.writeFd });
  pipe.closeWriteEnd();
  const pgidFile = join(config.workdir, "script.pgid");
  const pumps = Promise.all([
    pumpOutput(pipe.reader, "stdout", createMasker(claim.masks), shipper, t.maskIdleMs).done,
    pumpOutput(script.stderr, "stderr", createMasker(claim.masks), shipper, t.maskIdleMs).done,
  ]);
  const heartbeat = startHeartbeat(() => api.heartbeat(), claim.lease_ms, logger);

  const drainOutput = async (): Promise<void> => {
    await Promise.race([pumps, sleep(t.drainMs)]);
    pipe.reader.destroy();
    script.stderr.destroy();
    await pumps;
  };

  try {
    // The launcher reads this to end the group should the agent die without doing it.
    if (script.pid !== undefined) await writeFile(pgidFile, `${script.pid}\n`, { mode: 0o600 });
    logger.info({ scriptPid: script.pid, interpreter: claim.interpreter }, "script started");
    const first = await Promise.race([
      script.exited.then((exit) => ({ type: "exit" as const, exit })),
      failed.promise.then(() => ({ type: "failed" as const })),
      lost.promise.then(() => ({ type: "lost" as const })),
      whenAborted(deps.stop).then(() => ({ type: "stop" as const })),
    ]);
    if (first.type === "lost" || first.type === "stop") {
      heartbeat.stop();
      logger.warn({}, first.type === "lost" ? "the job's lease is gone; ending the script" : "stopping: ending the script; the job will be dispatched again");
      await script.terminate(t.killGraceMs);
      if (first.type === "stop") {
        await drainOutput();
        await Promise.race([shipper.flush(), sleep(t.drainMs)]);
      }
      jobAbort.abort(new FlowError("unavailable", "the agent is stopping"));
      return { type: first.type === "lost" ? "lost" : "stopped" };
    }
    // From here on a stop only cuts short the landing of what is left to send.
    deps.stop.addEventListener("abort", () => jobAbort.abort(new FlowError("unavailable", "the agent is stopping")), { once: true });
    // A determinism failure ends the script; a script that exited leaves no process behind.
    await script.terminate(first.type === "failed" ? t.killGraceMs : 0);
    const exit = await script.exited;
    const durationMs = Date.now() - started;
    await drainOutput();
    return await finishJob(deps, parts, shipper, { exit, failure, outputs, durationMs });
  } finally {
    heartbeat.stop();
    script.signalGroup("SIGKILL");
    await server.close();
    await rm(pgidFile, { force: true });
  }
};

interface Ending {
  readonly exit: ScriptExit;
  readonly failure: FlowError | undefined;
  readonly outputs: ReadonlyMap<string, string>;
  readonly durationMs: number;
}

/** Outputs count only on success (spec: "committed only on successful exit"). */
const finishBody = (end: Ending): FinishRequest => {
  const exitCode = end.failure ? 1 : end.exit.exitCode;
  const error = end.failure?.message ?? end.exit.startError ?? (end.exit.signal ? `the script was killed by ${end.exit.signal} (exit ${exitCode})` : undefined);
  return {
    exit_code: exitCode,
    outputs: exitCode === 0 ? Object.fromEntries(end.outputs) : {},
    ...(error !== undefined ? { error } : {}),
    duration_ms: Math.max(0, Math.round(end.durationMs)),
  };
};

const finishJob = async (deps: JobDeps, parts: JobParts, shipper: LogShipper, end: Ending): Promise<JobOutcome> => {
  const { logger } = deps;
  const { api, lost } = parts;
  const body = finishBody(end);
  const exitCode = body.exit_code;
  // A start failure is the one ending nothing else in the log shows (a client prints its own errors).
  if (end.exit.startError !== undefined) shipper.push("system", `error: ${end.exit.startError}\n`);
  try {
    await shipper.flush();
    let status: string | undefined;
    try {
      status = await api.finish(body);
    } catch (err) {
      // Refused outright (a body over a limit, ...): a job that can never finish would be dispatched
      // again forever, so it fails, saying why.
      if (!(err instanceof FlowError) || err.code === "job_lost" || err.code === "internal") throw err;
      logger.error({ err }, "the server refused the finish; failing the job");
      status = await api.finish({ exit_code: exitCode === 0 ? 1 : exitCode, outputs: {}, error: `the server refused the job's result: ${err.message}`, duration_ms: body.duration_ms });
    }
    logger.info({ exitCode, status }, "job finished");
    return { type: "finished", exitCode, status };
  } catch (err) {
    if (lost.settled()) {
      // Also the answer to a finish retried after its first attempt landed.
      logger.warn({ exitCode }, "the job's lease is gone; the finish was not (or was already) recorded");
      return { type: "lost" };
    }
    if (deps.stop.aborted) return { type: "stopped" };
    throw err;
  }
};
