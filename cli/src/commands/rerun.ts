/** `flow rerun <run> --from <site>`: a fresh run that keeps the recorded calls before the site. */
import type { RunRecord } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import { followRun } from "./follow.js";
import type { CommandSpec } from "./spec.js";

export const rerunSpec: CommandSpec = {
  name: "rerun",
  description: "start a fresh run of a run's recorded source that keeps its recorded calls before <site> and runs the script from line one",
  arguments: [{ name: "<run>", description: "the run to start from" }],
  options: [
    { flags: "--from <site>", description: "a step name, or name#<n> for its n-th (zero-based) call", mandatory: true },
    { flags: "--follow", description: "stream the new run's log; exit 0 if it succeeds, 1 if not" },
  ],
  examples: ["flow rerun run-01jd8k2m3n4p5q6r7s8t9v0w1x --from deploy", 'flow rerun "$run" --from test#2 --follow'],
  action: async (deps, { args: [id = ""], opts, flags }) => {
    const { from, follow } = opts as { from: string; follow?: boolean };
    await withSettings(deps, flags, async (ctx) => {
      const run = await ctx.api.call<RunRecord>("POST", `${scopedPath(ctx, "runs", id)}/rerun`, { from });
      if (!follow) {
        ctx.io.out(run.id);
        return;
      }
      ctx.io.note(run.id);
      deps.setExitCode(await followRun(ctx, run.id));
    });
  },
};
