/**
 * One job, start to end (shared/ARCHITECTURE.md, "How data flows", Execute): claim it from the
 * backend, then run it: a script (script-job.ts) or an activity child's command (activity-job.ts).
 *
 * `runJob(backend, options)` is the agent's job runner for any AgentBackend: main.ts calls it with
 * the HTTP AgentApiClient, and the local engine of `flow run` (cli/src/local) calls it with its
 * in-process backend, passing `cwd` (and `scriptPath`) so the user's file runs in place. runJob
 * owns the backend from the call on: it closes it (once) before it returns, and earlier to cut
 * retries short when the agent is told to stop or the lease is lost. `close()` must therefore be
 * idempotent and make calls still in flight fail.
 *
 * Endings (JobOutcome):
 * - `finished`: the script (or command) exited; finish landed;
 * - `suspended`: a durable call came back `pending`; the script was ended, its log shipped and the
 *   job suspended (no finish; the run's next job replays it when the wait resolves);
 * - `lost`: a call answered `job_lost`; the script was ended, nothing more is sent;
 * - `stopped`: `options.stop` was aborted; the script was ended, finish was NOT sent (the lease
 *   expires and the job is dispatched again, to replay);
 * - `not_claimed`: the claim was refused (the job was already taken).
 */
import { FlowError } from "@flowsvc/core";
import { runActivityJob } from "./activity-job.js";
import type { AgentBackend, AnyClaim } from "./backend.js";
import type { JobOptions, JobOutcome, JobScope } from "./job-kit.js";
import { DEFAULT_TIMINGS, deferred, isCode, watchLease } from "./job-kit.js";
import { runScriptJob } from "./script-job.js";

export type { JobOptions, JobOutcome, JobTimings } from "./job-kit.js";

export const runJob = async (backend: AgentBackend, options: JobOptions): Promise<JobOutcome> => {
  const { logger, stop } = options;
  const jobAbort = new AbortController();
  const lost = deferred<FlowError>();
  let closing: Promise<void> | undefined;
  const closeBackend = (): Promise<void> =>
    (closing ??= backend.close().catch((err: unknown) => logger.warn({ err }, "closing the backend failed")));
  const cut = (): void => {
    if (!jobAbort.signal.aborted) jobAbort.abort(new FlowError("unavailable", "the agent is stopping"));
    void closeBackend();
  };
  const watched = watchLease(backend, (err) => {
    lost.resolve(err);
    cut();
  });
  try {
    let claim: AnyClaim;
    stop.addEventListener("abort", cut, { once: true });
    try {
      claim = await backend.claim({ agent_id: options.agentId, capabilities: [...options.capabilities] });
    } catch (err) {
      if (stop.aborted) return { type: "stopped" };
      if (isCode(err, "job_lost")) return { type: "not_claimed", reason: (err as Error).message };
      throw err;
    } finally {
      stop.removeEventListener("abort", cut);
    }
    // The claim's request id is on every line of the job, as on the server's lines for its calls.
    const log = logger.child({
      runId: claim.run_id,
      jobId: claim.job_id,
      attempt: claim.attempt,
      kind: claim.kind,
      requestId: claim.request_id,
    });
    const scope: JobScope = {
      options,
      logger: log,
      backend: watched,
      timings: { ...DEFAULT_TIMINGS, ...options.timings },
      lost,
      jobAbort: jobAbort.signal,
      cut,
    };
    if (claim.kind === "activity") {
      log.info({ activityId: claim.activity_id, name: claim.name }, "activity claimed");
      return await runActivityJob(scope, claim);
    }
    log.info({ recorded: claim.journal.length }, "job claimed");
    return await runScriptJob(scope, claim);
  } finally {
    await closeBackend();
  }
};
