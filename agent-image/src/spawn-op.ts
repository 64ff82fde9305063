/**
 * `spawn` (spec, "In-script primitives"): submits an independent child run and prints its id. A
 * durable call checkpointed by position (its name is ""): a replay prints the recorded id and
 * submits nothing. The client sends the source as base64 (any bytes of a file or stdin).
 */
import { z } from "zod";
import { CallArgsSchemas } from "@flowsvc/core";
import { runDurableCall } from "./durable-call.js";
import type { OpContext } from "./op-kit.js";
import { b64, parseRequest, printAnswer } from "./op-kit.js";
import type { HandlerResult } from "./socket-server.js";

const SpawnRequest = z.object({
  source_b64: z.string(),
  filename: z.string(),
  as: z.string().optional(),
  tags: z.array(z.string()).optional(),
});
const SpawnResult = z.object({ run_id: z.string().min(1) });

export const spawnOp = (ctx: OpContext, raw: unknown): Promise<HandlerResult> => {
  const req = parseRequest(SpawnRequest, "spawn", raw);
  const args = parseRequest(CallArgsSchemas.spawn, "spawn", {
    source: Buffer.from(req.source_b64, "base64").toString("utf8"),
    filename: req.filename,
    ...(req.as !== undefined ? { as: req.as } : {}),
    ...(req.tags !== undefined ? { tags: req.tags } : {}),
  });
  return runDurableCall(ctx, {
    kind: "spawn",
    name: "",
    args,
    result: SpawnResult,
    answer: (r, replay) => printAnswer(ctx, b64(`${r.run_id}\n`), replay),
  });
};
