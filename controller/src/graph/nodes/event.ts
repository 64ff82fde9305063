/**
 * The `event` node (spec, "Parked runs and waits"; "Graph document shape": `event`, `when`): parks
 * until an event of type `event` arrives for which the bare-CEL `when` (over `event`) is true or
 * absent; every waiter receives the event. An event whose `when` is false or errors is declined
 * privately: the node stays parked and nothing is emitted or logged to anyone but the engine's
 * debug log. `timeout` (humantime) counts from the node's first park in the run: an attempt run
 * again (a retry, a server restarted mid-attempt) keeps the first deadline rather than starting a
 * new one. When it passes, the node succeeds with `{timed_out: true}`.
 */
import { FlowError, parseDuration } from "@flowsvc/core";
import type { Pool } from "pg";
import type { NodeExecutor, NodeOutcome } from "./types.js";
import { asConfig, requiredStr, str } from "./config.js";

/** When this node of this run first parked on its event wait; undefined when it never has. */
const firstPark = async (db: Pool, runId: string, nodeId: string): Promise<Date | undefined> => {
  const { rows } = await db.query<{ at: Date | null }>(
    `select min(created_at) as at from journal where run_id = $1 and kind = 'wait-event' and args ->> 'node' = $2`,
    [runId, nodeId],
  );
  return rows[0]?.at ?? undefined;
};

const timeoutMs = (text: string): number => {
  try {
    return parseDuration(text);
  } catch (e) {
    throw new FlowError("invalid_argument", `config.timeout: ${e instanceof Error ? e.message : String(e)}`);
  }
};

export const eventExecutor: NodeExecutor = {
  type: "event",
  start: async (ctx): Promise<NodeOutcome> => {
    try {
      const c = asConfig(ctx.config);
      const type = requiredStr(c, "event");
      const when = str(c, "when");
      const timeout = str(c, "timeout");
      const eventWait = { type, ...(when !== undefined ? { when } : {}) };
      if (timeout === undefined) return { kind: "park", signal: ctx.node.id, eventWait };
      const ms = timeoutMs(timeout);
      const since = (await firstPark(ctx.db, ctx.run.id, ctx.node.id)) ?? new Date();
      return { kind: "park", signal: ctx.node.id, eventWait, deadline: new Date(since.getTime() + ms) };
    } catch (e) {
      if (e instanceof FlowError) return { kind: "failed", error: e.message };
      throw e;
    }
  },
};
