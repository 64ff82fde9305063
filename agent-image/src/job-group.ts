/**
 * What a script job and an activity job do alike with the process group they start: record its
 * id for the launcher, remove that record at the end, and end the group when the lease is lost or
 * the agent is told to stop (no finish either way).
 */
import { rm, writeFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import type { JobOptions, JobOutcome, JobScope } from "./job-kit.js";
import { isCode } from "./job-kit.js";
import type { LogShipper } from "./log-shipper.js";
import type { RunningScript } from "./script-runner.js";

/**
 * Says where the group is, for whoever ends it should the agent die without doing it: the
 * launcher of a worker (`onGroup`, over IPC), `flow run`'s exit guard (the pgid file).
 */
export const recordGroup = async (options: Pick<JobOptions, "pgidFile" | "onGroup">, pid: number | undefined): Promise<void> => {
  if (pid === undefined) return;
  options.onGroup?.(pid);
  if (options.pgidFile !== undefined) await writeFile(options.pgidFile, `${pid}\n`, { mode: 0o600 });
};

export const removeGroupFile = async (pgidFile: string | undefined): Promise<void> => {
  if (pgidFile !== undefined) await rm(pgidFile, { force: true });
};

/** A job's running process group, as its ending sees it. */
export interface JobGroup {
  /** What the log calls the process: "script" or "command". */
  readonly what: string;
  readonly child: RunningScript;
  readonly shipper: LogShipper;
  /** Waits (at most drainMs) for the group's output to end, then stops reading. */
  readonly drain: () => Promise<void>;
}

/**
 * The lease is gone or the agent stops: end the group (SIGTERM, SIGKILL after the grace). On a
 * stop what it printed is flushed briefly; a lost job sends nothing more. Then everything still
 * being sent is cut.
 */
export const endInterruptedJob = async (scope: JobScope, group: JobGroup, reason: "lost" | "stop"): Promise<JobOutcome> => {
  const { logger, timings: t } = scope;
  const { what, child, shipper } = group;
  logger.warn(
    {},
    reason === "lost" ? `the job's lease is gone; ending the ${what}` : `stopping: ending the ${what}; the job will be dispatched again`,
  );
  await child.terminate(t.killGraceMs);
  if (reason === "stop") {
    await group.drain();
    await Promise.race([shipper.flush(), sleep(t.drainMs)]);
  }
  scope.cut();
  return { type: reason === "lost" ? "lost" : "stopped" };
};

/** A job's call failed: lost (lease gone) or stopped (the agent stops) say how it ends; any other error is thrown. */
export const outcomeOfFailure = (scope: JobScope, err: unknown): JobOutcome => {
  if (scope.lost.settled() || isCode(err, "job_lost")) return { type: "lost" };
  if (scope.options.stop.aborted) return { type: "stopped" };
  throw err;
};
