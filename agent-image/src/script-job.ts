/**
 * A script job: prepare the scratch directory, start the script with its sealed environment,
 * serve the socket, ship masked output, keep the lease, and end in one of four ways:
 * - the script exits: leftovers of its group are ended, output is flushed, finish lands (retried);
 *   a determinism error ends the script first and the job finishes with exit 1 and the message;
 * - a durable call comes back `pending`: the call is not answered, the group is ended (SIGTERM,
 *   SIGKILL after the grace), the log is flushed and shipped, the job is suspended; no finish;
 * - the lease is lost: the group is ended, nothing more is sent;
 * - the agent is told to stop: the group is ended, output is flushed briefly, no finish.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { composeScriptEnv, prependPath } from "@flowsvc/core";
import type { FlowError } from "@flowsvc/core";
import type { AnyClaim } from "./backend.js";
import { openCapturePipe, type CapturePipe } from "./capture-pipe.js";
import { startHeartbeat } from "./heartbeat.js";
import type { JobOutcome, JobScope } from "./job-kit.js";
import { deferred, whenAborted } from "./job-kit.js";
import type { JobGroup } from "./job-group.js";
import { endInterruptedJob, outcomeOfFailure, recordGroup, removeGroupFile } from "./job-group.js";
import { JournalCursor } from "./journal-cursor.js";
import { LogShipper } from "./log-shipper.js";
import type { PendingCall } from "./op-kit.js";
import { createMaskedLog } from "./output-pump.js";
import type { ScratchDir } from "./scratch-dir.js";
import { prepareScratchDir } from "./scratch-dir.js";
import { startScript, startScriptWith, type RunningScript, type StartScriptOptions } from "./script-runner.js";
import { finishScriptJob } from "./script-finish.js";
import { createOpHandler } from "./socket-ops.js";
import { startSocketServer } from "./socket-server.js";

export type ScriptClaim = Extract<AnyClaim, { kind: "script" }>;

export const runScriptJob = async (scope: JobScope, claim: ScriptClaim): Promise<JobOutcome> => {
  const scratch = await prepareScratchDir(scope.options.workdir, claim, scope.options.ownsWorkdir === true);
  try {
    return await executeScript(scope, claim, scratch);
  } finally {
    await scratch.remove();
  }
};

const scriptEnv = (scope: JobScope, claim: ScriptClaim, scratch: ScratchDir): Record<string, string> => {
  const { options } = scope;
  return composeScriptEnv({
    agentEnv: options.agentEnv,
    claimEnv: claim.env,
    trigger: claim.trigger,
    flowVars: {
      FLOW_AGENT_SOCKET: scratch.socketPath,
      FLOW_AGENT_PID: String(options.agentPid),
      FLOW_AGENT_ID: options.agentId,
      FLOW_WORKFLOW_ID: claim.run_id,
      FLOW_ACTIVITY_ID: claim.job_id,
      FLOW_INPUT_FILE: scratch.inputPath,
    },
    path: prependPath(options.clientDir, options.agentEnv["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"),
  });
};

const executeScript = async (scope: JobScope, claim: ScriptClaim, scratch: ScratchDir): Promise<JobOutcome> => {
  const { options, logger, backend, timings: t, lost } = scope;
  const pipe = openCapturePipe(scratch.capturePath);
  const shipper = new LogShipper({ send: (chunks) => backend.log(chunks), logger, intervalMs: t.logIntervalMs, signal: scope.jobAbort });
  const outputs = new Map<string, string>();
  let failure: FlowError | undefined;
  const failed = deferred<FlowError>();
  const suspended = deferred<PendingCall>();
  const server = await startSocketServer(
    scratch.socketPath,
    createOpHandler({
      agentId: options.agentId,
      runId: claim.run_id,
      captureIno: pipe.ino,
      cursor: new JournalCursor(claim.journal),
      backend,
      outputs,
      logger,
      failure: () => failure ?? lost.settled(),
      onDeterminism: (err) => {
        failure ??= err;
        failed.resolve(failure);
      },
      onSuspend: (call) => suspended.resolve(call),
    }),
    logger,
    { fresh: true }, // prepareScratchDir made its directory for this job
  );

  const [command = "bash", ...interpreterArgs] = claim.interpreter;
  const started = Date.now();
  const script = await launchScript(scope, pipe, {
    command,
    args: [...interpreterArgs, options.scriptPath ?? scratch.scriptPath],
    cwd: options.cwd ?? scratch.dir,
    env: scriptEnv(scope, claim, scratch),
    stdoutFd: pipe.writeFd,
  });
  pipe.closeWriteEnd();
  // stdout and stderr share the run's log, so they are masked as one (core's createLogMasker).
  const log = createMaskedLog(claim.masks, ["stdout", "stderr"], shipper);
  const pumps = Promise.all([log.pump(pipe.reader, "stdout"), log.pump(script.stderr, "stderr")]);
  const heartbeat = startHeartbeat(() => backend.heartbeat(), claim.lease_ms, logger);

  const drainOutput = async (): Promise<void> => {
    // An unref'd timer: once the pumps end, nothing keeps the process (or `flow run`) alive.
    await Promise.race([pumps, sleep(t.drainMs, undefined, { ref: false })]);
    pipe.reader.destroy();
    script.stderr.destroy();
    await pumps;
  };

  try {
    await recordGroup(options, script.pid);
    logger.info({ scriptPid: script.pid, interpreter: claim.interpreter }, "script started");
    const first = await Promise.race([
      script.exited.then((exit) => ({ type: "exit" as const, exit })),
      failed.promise.then(() => ({ type: "failed" as const })),
      suspended.promise.then((call) => ({ type: "suspend" as const, call })),
      lost.promise.then(() => ({ type: "lost" as const })),
      whenAborted(options.stop).then(() => ({ type: "stop" as const })),
    ]);
    const group: JobGroup = { what: "script", child: script, shipper, drain: drainOutput };
    if (first.type === "lost" || first.type === "stop") {
      heartbeat.stop();
      return await endInterruptedJob(scope, group, first.type);
    }
    // From here on a stop only cuts short the landing of what is left to send.
    options.stop.addEventListener("abort", scope.cut, { once: true });
    if (first.type === "suspend") {
      heartbeat.stop();
      return await suspendJob(scope, group, first.call);
    }
    // A determinism failure ends the script; a script that exited leaves no process behind.
    await script.terminate(first.type === "failed" ? t.killGraceMs : 0);
    const exit = await script.exited;
    const durationMs = Date.now() - started;
    await drainOutput();
    return await finishScriptJob(scope, shipper, { exit, failure, outputs, durationMs });
  } finally {
    heartbeat.stop();
    options.stop.removeEventListener("abort", scope.cut);
    script.signalGroup("SIGKILL");
    // A process that left the group may still hold the pipes: stop reading them, or a worker agent
    // (one process, many jobs) would keep their descriptors and pumps past the job.
    pipe.reader.destroy();
    script.stderr.destroy();
    await server.close();
    await removeGroupFile(options.pgidFile);
  }
};

/**
 * The script started by the worker's spawner when it has one (no fork of the agent; stderr is a
 * second FIFO), else by Node's spawn.
 */
const launchScript = async (scope: JobScope, pipe: CapturePipe, start: StartScriptOptions): Promise<RunningScript> => {
  const spawner = scope.options.spawner?.();
  if (spawner?.alive) {
    const stderrPipe = openCapturePipe(`${start.cwd}/.flow-stderr`);
    const script = await startScriptWith(spawner, { ...start, stdoutPath: `/proc/${process.pid}/fd/${pipe.writeFd}`, stderrPipe });
    if (script) return script;
    stderrPipe.reader.destroy();
    scope.logger.warn({}, "the script spawner ended or cannot open a job's output; scripts start with Node's spawn");
  }
  return startScript(start);
};

/** The run parks on `call`: end the script, ship everything it printed, then suspend the job. */
const suspendJob = async (scope: JobScope, group: JobGroup, call: PendingCall): Promise<JobOutcome> => {
  const { logger, backend, timings: t } = scope;
  logger.info(
    { position: call.position, kind: call.kind, substate: call.substate, deadline: call.deadline },
    "the run parks: ending the script",
  );
  await group.child.terminate(t.killGraceMs);
  await group.drain();
  try {
    await group.shipper.flush();
    const status = await backend.suspend();
    logger.info({ status }, "job suspended");
    return { type: "suspended", status };
  } catch (err) {
    const outcome = outcomeOfFailure(scope, err);
    if (outcome.type === "lost") logger.warn({}, "the job's lease is gone; the suspension was not (or was already) recorded");
    return outcome;
  }
};
