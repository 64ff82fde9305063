/** `flow signal <run> <name> [--payload <json>]`: deliver a signal to a run (user authentication). */
import type { Environment } from "../config.js";
import { mayBeLocalRun } from "../local-state-dir.js";
import { scopedPath, withSettings } from "./context.js";
import { parseJsonFlag } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

export const signalSpec: CommandSpec = {
  name: "signal",
  description: "send a signal to a run: the run's next `flow wait-signal <name>` takes it (signals queue up when nobody waits)",
  arguments: [
    { name: "<run>", description: "the run id" },
    { name: "<name>", description: "the signal name" },
  ],
  options: [{ flags: "--payload <json>", description: "the payload, any JSON (default null)", parse: parseJsonFlag }],
  examples: ['flow signal "$run" approved', 'flow signal run-01jd8k2m3n4p5q6r7s8t9v0w1x deploy --payload \'{"env":"prod"}\''],
  action: async (deps, { args: [id = "", name = ""], opts, flags }) => {
    const { payload } = opts as { payload?: unknown };
    if (await deliverLocally(deps.env, { id, name, payload })) return;
    await withSettings(deps, flags, async (ctx) => {
      await ctx.api.call("POST", `${scopedPath(ctx, "runs", id)}/signals/${encodeURIComponent(name)}`, { payload: payload ?? null });
    });
  },
};

/**
 * A run started with `flow run` on this machine takes its signals from a local spool, not the server.
 * The local engine (ES modules, zod) loads only when the run's directory exists (one stat): a signal
 * for a server run reaches its request without it (issue 15: start-up).
 */
const deliverLocally = async (
  env: Environment,
  { id, name, payload }: { id: string; name: string; payload: unknown },
): Promise<boolean> => {
  if (!mayBeLocalRun(id, env)) return false;
  const { deliverLocalSignal } = await import("../local/local-signal.js");
  return deliverLocalSignal(id, name, JSON.stringify(payload ?? null), env);
};
