/** `flow cancel <run> [--reason <text>]`: stop a run; `run.cancelled` carries the reason. */
import { Command } from "commander";
import type { RunRecord } from "./api-types.js";
import { scopedPath, withApi } from "./context.js";
import type { CommandDeps } from "./context.js";
import { examples } from "./options.js";

export const cancelCommand = (deps: CommandDeps): Command =>
  new Command("cancel")
    .description("cancel a run: its agent ends the script, its leases are released, and run.cancelled is published")
    .argument("<run>", "the run id")
    .option("--reason <text>", "why (default: cancelled by <you>)")
    .addHelpText(
      "after",
      examples('flow cancel "$run"', "flow cancel run-01jd8k2m3n4p5q6r7s8t9v0w1x --reason 'superseded by a newer push'"),
    )
    .action(async (id: string, opts: { reason?: string }, cmd: Command) => {
      await withApi(deps, cmd, async (ctx) => {
        const run = await ctx.api.call<RunRecord>(
          "POST",
          `${scopedPath(ctx, "runs", id)}/cancel`,
          opts.reason === undefined ? {} : { reason: opts.reason },
        );
        ctx.io.out(`${run.id} ${run.status}`);
      });
    });
