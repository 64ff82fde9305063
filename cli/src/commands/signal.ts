/** `flow signal <run> <name> [--payload <json>]`: deliver a signal to a run (user authentication). */
import { Command } from "commander";
import { scopedPath, withApi } from "./context.js";
import type { CommandDeps } from "./context.js";
import { examples, parseJsonFlag } from "./options.js";

export const signalCommand = (deps: CommandDeps): Command =>
  new Command("signal")
    .description("send a signal to a run: the run's next `flow wait-signal <name>` takes it (signals queue up when nobody waits)")
    .argument("<run>", "the run id")
    .argument("<name>", "the signal name")
    .option("--payload <json>", "the payload, any JSON (default null)", parseJsonFlag)
    .addHelpText(
      "after",
      examples('flow signal "$run" approved', 'flow signal run-01jd8k2m3n4p5q6r7s8t9v0w1x deploy --payload \'{"env":"prod"}\''),
    )
    .action(async (id: string, name: string, opts: { payload?: unknown }, cmd: Command) => {
      if (await deliverLocally(id, name, opts.payload)) return;
      await withApi(deps, cmd, async (ctx) => {
        await ctx.api.call("POST", `${scopedPath(ctx, "runs", id)}/signals/${encodeURIComponent(name)}`, { payload: opts.payload ?? null });
      });
    });

/** A run started with `flow run` on this machine takes its signals from a local spool, not the server. */
const deliverLocally = async (id: string, name: string, payload: unknown): Promise<boolean> => {
  const { deliverLocalSignal } = await import("../local/local-signal.js");
  return deliverLocalSignal(id, name, JSON.stringify(payload ?? null));
};
