/**
 * `flow follow <run>`: copies the run's log to stdout as it arrives, then exits 0 when the run
 * succeeded and 1 when it failed or was cancelled. `flow submit --follow` uses followRun.
 */
import { FlowError } from "@flowsvc/core/errors";
import { isTerminalStatus } from "./api-types.js";
import type { RunRecord } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import type { CommandContext } from "./context.js";
import type { CommandSpec } from "./spec.js";

/** Streams the log, then answers the exit status the run's outcome maps to. */
export const followRun = async (ctx: CommandContext, id: string): Promise<number> => {
  await ctx.api.stream(`${scopedPath(ctx, "runs", id, "log")}?follow=1`, (chunk) => ctx.io.write(chunk));
  const run = await ctx.api.call<RunRecord>("GET", scopedPath(ctx, "runs", id));
  if (!isTerminalStatus(run.status)) {
    throw new FlowError("unavailable", `the log stream of ${id} ended before the run finished (status ${run.status})`, {
      hint: `run \`flow follow ${id}\` to follow it again, or \`flow status ${id}\``,
    });
  }
  if (run.status === "succeeded") return 0;
  ctx.io.note(`run ${id} ${run.status}${run.error ? `: ${run.error}` : ""}`);
  return 1;
};

export const followSpec: CommandSpec = {
  name: "follow",
  description: "stream a run's log to stdout until it finishes; exit 0 if it succeeded, 1 if it failed or was cancelled",
  arguments: [{ name: "<run>", description: "the run id" }],
  examples: ["flow follow run-01jd8k2m3n4p5q6r7s8t9v0w1x", 'flow follow "$(flow submit build.sh)" > build.log'],
  action: async (deps, { args: [id = ""], flags }) => {
    deps.setExitCode(await withSettings(deps, flags, (ctx) => followRun(ctx, id)));
  },
};
