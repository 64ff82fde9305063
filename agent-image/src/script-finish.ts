/**
 * The end of a script job that ran to its exit: the finish body (exit code, outputs, error) and
 * its landing. Outputs count only on success (spec: "committed only on successful exit").
 */
import { FlowError } from "@flowsvc/core";
import type { FinishRequest, LogChunk } from "@flowsvc/core";
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

/**
 * The finish lands with the log the shipper still held (one request, one commit). Refused outright
 * (a body over a limit, ...): the log goes alone, as the shipper would have sent it (a batch the
 * server refuses is dropped there too), and the job fails saying why: a job that can never finish
 * would be dispatched again forever.
 */
const landFinish = async (scope: JobScope, shipper: LogShipper, body: FinishRequest): Promise<string | undefined> => {
  const { logger, backend } = scope;
  const log = await shipper.takeRest();
  try {
    return await backend.finish(log.length > 0 ? { ...body, log } : body);
  } catch (err) {
    if (!(err instanceof FlowError) || err.code === "job_lost" || err.code === "internal" || scope.options.stop.aborted) throw err;
    logger.error({ err }, "the server refused the finish; failing the job");
    if (log.length > 0) await shipAlone(scope, log);
    return await backend.finish({
      exit_code: body.exit_code === 0 ? 1 : body.exit_code,
      outputs: {},
      error: `the server refused the job's result: ${err.message}`,
      duration_ms: body.duration_ms,
    });
  }
};

/** The last log batch on its own: a refusal drops it (said in the agent's log), a lost job stops here. */
const shipAlone = async (scope: JobScope, log: LogChunk[]): Promise<void> => {
  try {
    await scope.backend.log(log);
  } catch (err) {
    if (!(err instanceof FlowError) || err.code === "job_lost" || err.code === "internal" || scope.options.stop.aborted) throw err;
    scope.logger.error({ err, chunks: log.length }, "the server refused a log batch; it is dropped");
  }
};

export const finishScriptJob = async (scope: JobScope, shipper: LogShipper, end: ScriptEnding): Promise<JobOutcome> => {
  const { logger, lost } = scope;
  const body = finishBody(end);
  const exitCode = body.exit_code;
  // A start failure is the one ending nothing else in the log shows (a client prints its own errors).
  if (end.exit.startError !== undefined) shipper.push("system", `error: ${end.exit.startError}\n`);
  try {
    const status = await landFinish(scope, shipper, body);
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
