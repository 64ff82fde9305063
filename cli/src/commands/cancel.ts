/** `flow cancel <run> [--reason <text>]`: stop a run; `run.cancelled` carries the reason. */
import type { RunRecord } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import type { CommandSpec } from "./spec.js";

export const cancelSpec: CommandSpec = {
  name: "cancel",
  description: "cancel a run: its agent ends the script, its leases are released, and run.cancelled is published",
  arguments: [{ name: "<run>", description: "the run id" }],
  options: [{ flags: "--reason <text>", description: "why (default: cancelled by <you>)" }],
  examples: ['flow cancel "$run"', "flow cancel run-01jd8k2m3n4p5q6r7s8t9v0w1x --reason 'superseded by a newer push'"],
  action: async (deps, { args: [id = ""], opts, flags }) => {
    const { reason } = opts as { reason?: string };
    await withSettings(deps, flags, async (ctx) => {
      const run = await ctx.api.call<RunRecord>("POST", `${scopedPath(ctx, "runs", id)}/cancel`, reason === undefined ? {} : { reason });
      ctx.io.out(`${run.id} ${run.status}`);
    });
  },
};
