/** The `emit` node: one event (`type`, `payload`, `key`) per node attempt; an attempt run again answers the recorded id. */
import type { NodeExecutor } from "./types.js";
import { asConfig, requiredStr, str } from "./config.js";

export const emitExecutor: NodeExecutor = {
  type: "emit",
  start: async (ctx) => {
    const c = asConfig(ctx.config);
    const eventId = await ctx.emit(requiredStr(c, "type"), c["payload"] ?? null, str(c, "key"));
    return { kind: "succeeded", output: { event_id: eventId } };
  },
};
