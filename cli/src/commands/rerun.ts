/** `flow rerun <run> --from <site>`: a fresh run that keeps the recorded calls before the site. */
import { Command } from "commander";
import type { RunRecord } from "./api-types.js";
import { scopedPath, withApi } from "./context.js";
import type { CommandDeps } from "./context.js";
import { followRun } from "./follow.js";
import { examples } from "./options.js";

export const rerunCommand = (deps: CommandDeps): Command =>
  new Command("rerun")
    .description(
      "start a fresh run of a run's recorded source that keeps its recorded calls before <site> and runs the script from line one",
    )
    .argument("<run>", "the run to start from")
    .requiredOption("--from <site>", "a step name, or name#<n> for its n-th (zero-based) call")
    .option("--follow", "stream the new run's log; exit 0 if it succeeds, 1 if not")
    .addHelpText("after", examples("flow rerun run-01jd8k2m3n4p5q6r7s8t9v0w1x --from deploy", 'flow rerun "$run" --from test#2 --follow'))
    .action(async (id: string, opts: { from: string; follow?: boolean }, cmd: Command) => {
      await withApi(deps, cmd, async (ctx) => {
        const run = await ctx.api.call<RunRecord>("POST", `${scopedPath(ctx, "runs", id)}/rerun`, { from: opts.from });
        if (!opts.follow) {
          ctx.io.out(run.id);
          return;
        }
        ctx.io.note(run.id);
        deps.setExitCode(await followRun(ctx, run.id));
      });
    });
