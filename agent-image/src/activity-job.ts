/**
 * An activity child's job (docs/internals.md, "Agent API": `kind: "activity"`): run the claim's
 * `argv` (execvp semantics) in the agent's working directory with the step-body environment, keep
 * its stdout (at most the step output limit), mask its stderr into the run's log, keep the lease,
 * and finish with the exit code and stdout (`finishActivity`). A command that cannot start ends
 * with 127 and says why. Lost and stopped end as a script job does: the group is ended, no finish.
 */
import { mkdir } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { STEP_OUTPUT_LIMIT, stepOutputTooLargeMessage } from "@flowsvc/core";
import type { ActivityClaim } from "@flowsvc/core";
import { composeActivityEnv } from "./activity-env.js";
import type { ActivityFinish } from "./backend.js";
import { collectCapped } from "./capped-output.js";
import { startHeartbeat } from "./heartbeat.js";
import type { JobOutcome, JobScope } from "./job-kit.js";
import { whenAborted } from "./job-kit.js";
import { endInterruptedJob, outcomeOfFailure, recordGroup, removeGroupFile } from "./job-group.js";
import { LogShipper } from "./log-shipper.js";
import { createMaskedLog } from "./output-pump.js";
import type { RunningScript, ScriptExit } from "./script-runner.js";
import { startScript } from "./script-runner.js";

export interface ActivityEnding {
  readonly exit: ScriptExit;
  readonly stdout: Buffer;
  /** Every byte the command wrote to stdout, kept or not. */
  readonly stdoutTotal: number;
  readonly durationMs: number;
}

/** What the child's finish reports: over the output limit it failed (exit 1) with how far over. */
export const activityFinishBody = (end: ActivityEnding): ActivityFinish => {
  const duration_ms = Math.max(0, Math.round(end.durationMs));
  if (end.stdoutTotal > STEP_OUTPUT_LIMIT) {
    return { exit_code: 1, stdout_b64: "", error: stepOutputTooLargeMessage(end.stdoutTotal), duration_ms };
  }
  const { exitCode, signal, startError } = end.exit;
  const error = startError ?? (signal ? `the command was killed by ${signal} (exit ${exitCode})` : undefined);
  return { exit_code: exitCode, stdout_b64: end.stdout.toString("base64"), ...(error !== undefined ? { error } : {}), duration_ms };
};

interface RunningActivity {
  readonly child: RunningScript;
  readonly shipper: LogShipper;
  readonly started: number;
  /** Waits (at most drainMs) for the command's output to end, then stops reading. */
  drain(): Promise<void>;
  /** Everything the command wrote to stdout so far, kept (up to the limit) and counted. */
  stdout(): { readonly bytes: Buffer; readonly total: number };
}

const startActivity = (scope: JobScope, claim: ActivityClaim, cwd: string): RunningActivity => {
  const { options, logger, backend, timings: t } = scope;
  const shipper = new LogShipper({ send: (chunks) => backend.log(chunks), logger, intervalMs: t.logIntervalMs, signal: scope.jobAbort });
  const [command = "", ...args] = claim.argv;
  const env = composeActivityEnv({ agentEnv: options.agentEnv, claimEnv: claim.env, clientDir: options.clientDir });
  const started = Date.now();
  const child = startScript({ command, args, cwd, env });
  const stdout = child.stdout ? collectCapped(child.stdout, STEP_OUTPUT_LIMIT) : undefined;
  const reading = Promise.all([stdout?.done, createMaskedLog(claim.masks, ["stderr"], shipper).pump(child.stderr, "stderr")]);
  return {
    child,
    shipper,
    started,
    drain: async () => {
      await Promise.race([reading, sleep(t.drainMs)]);
      child.stdout?.destroy();
      child.stderr.destroy();
      await reading;
    },
    stdout: () => ({ bytes: stdout?.bytes() ?? Buffer.alloc(0), total: stdout?.total() ?? 0 }),
  };
};

/** The command exited: end what it left behind, report its result. */
const finishActivityJob = async (scope: JobScope, claim: ActivityClaim, run: RunningActivity): Promise<JobOutcome> => {
  await run.child.terminate(0); // leftovers of the command's group
  const exit = await run.child.exited;
  const durationMs = Date.now() - run.started;
  await run.drain();
  const { bytes, total } = run.stdout();
  const body = activityFinishBody({ exit, stdout: bytes, stdoutTotal: total, durationMs });
  if (body.error !== undefined) run.shipper.push("system", `error: activity ${claim.name}: ${body.error}\n`);
  await run.shipper.flush();
  const status = await scope.backend.finishActivity(body);
  scope.logger.info({ exitCode: body.exit_code, status }, "activity finished");
  return { type: "finished", exitCode: body.exit_code, status };
};

/** The job's working directory (its pgid file goes there), which the local launcher does not make, and the command's. */
const prepareDirectories = async (options: JobScope["options"]): Promise<string> => {
  await mkdir(options.workdir, { recursive: true, mode: 0o700 });
  const cwd = options.cwd ?? options.workdir;
  if (cwd !== options.workdir) await mkdir(cwd, { recursive: true, mode: 0o700 });
  return cwd;
};

export const runActivityJob = async (scope: JobScope, claim: ActivityClaim): Promise<JobOutcome> => {
  const { options, logger, backend, lost } = scope;
  const run = startActivity(scope, claim, await prepareDirectories(options));
  const { child } = run;
  const heartbeat = startHeartbeat(() => backend.heartbeat(), claim.lease_ms, logger);
  try {
    await recordGroup(options, child.pid);
    logger.info({ pid: child.pid }, "activity started");
    const first = await Promise.race([
      child.exited.then(() => "exit" as const),
      lost.promise.then(() => "lost" as const),
      whenAborted(options.stop).then(() => "stop" as const),
    ]);
    if (first !== "exit") {
      heartbeat.stop();
      return await endInterruptedJob(scope, { what: "command", child, shipper: run.shipper, drain: () => run.drain() }, first);
    }
    // From here on a stop only cuts short the landing of what is left to send.
    options.stop.addEventListener("abort", scope.cut, { once: true });
    return await finishActivityJob(scope, claim, run);
  } catch (err) {
    return outcomeOfFailure(scope, err);
  } finally {
    heartbeat.stop();
    options.stop.removeEventListener("abort", scope.cut);
    child.signalGroup("SIGKILL");
    // Stop reading pipes a process that left the group may hold (a worker agent outlives the job).
    child.stdout?.destroy();
    child.stderr.destroy();
    await removeGroupFile(options.pgidFile);
  }
};
