/**
 * The `trigger` node: where a graph run starts from its own endpoint (spec, "Inbound hook and
 * trigger-node choice"). Its endpoint (ingest/src/routes/graph-endpoints.ts) records each delivery
 * as `graph.<graph>.<node>.delivery` and starts a run of the stored graph whose input is that
 * event's envelope; in the run, the node outputs the run's input: `nodes.<id>.output.payload.body`
 * is what the sender posted. A run started otherwise (a submit with `input`) gets its input too.
 */
import type { NodeExecutor } from "./types.js";

export const triggerExecutor: NodeExecutor = {
  type: "trigger",
  start: (ctx) => Promise.resolve({ kind: "succeeded", output: ctx.run.input ?? null }),
};
