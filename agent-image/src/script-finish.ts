/**
 * The end of a script job that ran to its exit: the finish body (exit code, outputs, error) and
 * its landing. Outputs count only on success (spec: "committed only on successful exit").
 */
import { FlowError } from "@flowsvc/core";
import type { FinishRequest } from "@flowsvc/core";
import type { JobOutcome, JobScope } from "./job-kit.js";
import type { LogShipper } from "./log-shipper.js";
import type { ScriptExit } from "./script-runner.js";

export interface ScriptEnding {
  readonly exit: ScriptExit;
  /** The job's own failure (a determinism error), which wins over the exit code. */
  readonly failure: FlowError | undefined;
  readonly outputs: ReadonlyMap<string, string>;
  readonly durationMs: number;
}

export const finishBody = (end: ScriptEnding): FinishRequest => {
  const exitCode = end.failure ? 1 : end.exit.exitCode;
  const error =
    end.failure?.message ??
    end.exit.startError ??
    (end.exit.signal ? `the script was killed by ${end.exit.signal} (exit ${exitCode})` : undefined);
  return {
    exit_code: exitCode,
    outputs: exitCode === 0 ? Object.fromEntries(end.outputs) : {},
    ...(error !== undefined ? { error } : {}),
    duration_ms: Math.max(0, Math.round(end.durationMs)),
  };
};

export const finishScriptJob = async (scope: JobScope, shipper: LogShipper, end: ScriptEnding): Promise<JobOutcome> => {
  const { logger, backend, lost } = scope;
  const body = finishBody(end);
  const exitCode = body.exit_code;
  // A start failure is the one ending nothing else in the log shows (a client prints its own errors).
  if (end.exit.startError !== undefined) shipper.push("system", `error: ${end.exit.startError}\n`);
  try {
    await shipper.flush();
    let status: string | undefined;
    try {
      status = await backend.finish(body);
    } catch (err) {
      // Refused outright (a body over a limit, ...): a job that can never finish would be dispatched
      // again forever, so it fails, saying why.
      if (!(err instanceof FlowError) || err.code === "job_lost" || err.code === "internal" || scope.options.stop.aborted) throw err;
      logger.error({ err }, "the server refused the finish; failing the job");
      status = await backend.finish({
        exit_code: exitCode === 0 ? 1 : exitCode,
        outputs: {},
        error: `the server refused the job's result: ${err.message}`,
        duration_ms: body.duration_ms,
      });
    }
    logger.info({ exitCode, status }, "job finished");
    return { type: "finished", exitCode, status };
  } catch (err) {
    if (lost.settled()) {
      // Also the answer to a finish retried after its first attempt landed.
      logger.warn({ exitCode }, "the job's lease is gone; the finish was not (or was already) recorded");
      return { type: "lost" };
    }
    if (scope.options.stop.aborted) return { type: "stopped" };
    throw err;
  }
};
