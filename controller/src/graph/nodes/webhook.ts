/**
 * The `webhook` node: parks until the graph's endpoint for this node receives a delivery (spec,
 * "Inbound hook and trigger-node choice"). The endpoint exists while the stored graph has the node
 * (created by `flow graph set`, which prints its URL and secret once); each delivery is the event
 * `graph.<graph>.<node>.<config.event_type, default delivery>`, and the node wakes on the first one
 * after it parked, its output the event (`nodes.<id>.output.payload.body`). A graph submitted as a
 * file has no endpoints: its webhook node fails, saying so.
 */
import { graphEndpointType } from "@flowsvc/store";
import type { NodeExecutor } from "./types.js";

export const webhookExecutor: NodeExecutor = {
  type: "webhook",
  start: (ctx) => {
    if (ctx.run.graphName === null)
      return Promise.resolve({
        kind: "failed",
        error: `webhook node ${ctx.node.id} has no endpoint: only a stored graph has endpoints (flow graph set <name> <file>, then run the graph by name)`,
      });
    const c = ctx.config as Record<string, unknown> | null;
    const type = graphEndpointType(ctx.run.graphName, ctx.node.id, c?.["event_type"]);
    return Promise.resolve({ kind: "park", signal: ctx.node.id, eventWait: { type } });
  },
};
