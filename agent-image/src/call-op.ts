/**
 * `call` (issue 11 item 5): `flow call node <kind> [--config <json>]`, `flow call graph <name>
 * [--input <json>]`, `flow call graph --definition <file|->` submit a child graph run (a one-node
 * graph; the stored graph; the given document), park until it ends and print its output as one line
 * of JSON (a node call prints the node's output); the child's failure exits 1 with its error on
 * stderr. A durable call checkpointed by position (name ""): a replay answers from the journal and
 * starts no child. The server checks the graph as any submitted graph (parse, credentials).
 */
import { z } from "zod";
import { CallArgsSchemas } from "@flowsvc/core";
import { runDurableCall } from "./durable-call.js";
import type { OpContext } from "./op-kit.js";
import { b64, ok, parseRequest, printAnswer } from "./op-kit.js";
import type { HandlerResult } from "./socket-server.js";

const CallRequest = z
  .object({
    node: z.string().max(256).optional(),
    config: z.unknown().optional(),
    graph: z.string().max(256).optional(),
    definition_b64: z.string().optional(),
    input: z.unknown().optional(),
  })
  .passthrough();
const CallResult = z.object({
  run_id: z.string().min(1),
  status: z.string(),
  output: z.unknown().optional(),
  error: z.string().nullable().optional(),
});

/** The run's output; for a node call, the one node's output. */
const printed = (node: boolean, output: unknown): unknown => {
  if (!node) return output ?? null;
  const nodes = (output as { nodes?: Record<string, unknown> } | null)?.nodes;
  return nodes && "call" in nodes ? nodes["call"] : null;
};

const answer = (ctx: OpContext, node: boolean, r: z.infer<typeof CallResult>, replay: boolean): HandlerResult => {
  if (r.status === "succeeded") return printAnswer(ctx, b64(`${JSON.stringify(printed(node, r.output))}\n`), replay);
  return ok({ exit: 1, stderr: `flow: call: child run ${r.run_id} ${r.status}: ${r.error ?? "no error text"}\n` });
};

export const callOp = (ctx: OpContext, raw: unknown): Promise<HandlerResult> => {
  const req = parseRequest(CallRequest, "call", raw);
  const args = parseRequest(CallArgsSchemas.call, "call", {
    ...(req.node !== undefined ? { node: req.node, ...(req.config !== undefined ? { config: req.config } : {}) } : {}),
    ...(req.graph !== undefined ? { graph: req.graph } : {}),
    ...(req.definition_b64 !== undefined ? { definition: Buffer.from(req.definition_b64, "base64").toString("utf8") } : {}),
    ...(req.input !== undefined ? { input: req.input } : {}),
  });
  return runDurableCall(ctx, {
    kind: "call",
    name: "",
    args,
    result: CallResult,
    answer: (r, replay) => answer(ctx, req.node !== undefined, r, replay),
  });
};
