/**
 * `step` and `step.complete` (docs/internals.md, "Step body"). `step` takes the next position: a
 * recorded step answers from the journal; a new one hands the client a position and its
 * idempotency key, the client runs the body and sends `step.complete`, which is recorded over the
 * backend before it is answered.
 */
import { z } from "zod";
import { FlowError, STEP_OUTPUT_LIMIT, StepResultSchema, stepOutputTooLargeMessage } from "@flowsvc/core";
import type { JournalEntry, StepResult } from "@flowsvc/core";
import { idempotencyKeyFor } from "./journal-cursor.js";
import type { OpContext } from "./op-kit.js";
import { fail, failDeterminism, isDeterminism, ok, parseRequest, readResult } from "./op-kit.js";
import type { HandlerResult } from "./socket-server.js";

const StepRequest = z.object({ name: z.string().min(1).max(512), label: z.string().max(1024).optional() });
const StepCompleteRequest = z.object({
  position: z.number().int().nonnegative(),
  stdout_b64: z.string(),
  exit: z.number().int(),
  overflow_bytes: z.number().int().nonnegative().optional(),
});

/**
 * What a step's result makes the client do. First pass: exit with the code (the client already
 * echoed stdout live), or fail with the recorded error. Replay: print the recorded stdout unless
 * stdout is the capture pipe, repeat the recorded error on stderr, exit with the recorded code.
 */
const stepAnswer = (result: StepResult, replay: boolean, captureIno: number): HandlerResult => {
  if (!replay) {
    return result.error === undefined ? ok({ exit: result.exit }) : fail(new FlowError("step_output_too_large", result.error), result.exit);
  }
  return ok({
    replay: true,
    capture_ino: captureIno,
    stdout_b64: result.stdout_b64,
    ...(result.error !== undefined ? { stderr: `error: ${result.error}\n` } : {}),
    exit: result.exit,
  });
};

const readStepResult = (entry: JournalEntry): StepResult => readResult(StepResultSchema, "step", entry.position, entry.result);

export interface StepOps {
  step(raw: unknown): HandlerResult;
  stepComplete(raw: unknown): Promise<HandlerResult>;
}

export const createStepOps = (ctx: OpContext): StepOps => {
  /** Steps handed out as new and not yet completed, by position. */
  const running = new Map<number, { name: string; ordinal: number }>();

  const step = (raw: unknown): HandlerResult => {
    const { name } = parseRequest(StepRequest, "step", raw);
    let call;
    try {
      call = ctx.cursor.next("step", name);
    } catch (err) {
      if (isDeterminism(err)) return failDeterminism(ctx, err);
      throw err;
    }
    if (call.match.type === "replay") return stepAnswer(readStepResult(call.match.entry), true, ctx.captureIno);
    running.set(call.position, { name, ordinal: call.ordinal });
    return ok({
      replay: false,
      position: call.position,
      idempotency_key: idempotencyKeyFor(ctx.runId, call.position),
      capture_ino: ctx.captureIno,
    });
  };

  const stepComplete = async (raw: unknown): Promise<HandlerResult> => {
    const req = parseRequest(StepCompleteRequest, "step.complete", raw);
    const call = running.get(req.position);
    if (!call) throw new FlowError("invalid_argument", `no step is running at call #${req.position}`);
    // overflow_bytes is the whole count of the step's stdout, sent once it passed the limit.
    const total = Math.max(req.overflow_bytes ?? 0, Buffer.byteLength(req.stdout_b64, "base64"));
    const result: StepResult =
      total > STEP_OUTPUT_LIMIT
        ? { stdout_b64: "", exit: 1, error: stepOutputTooLargeMessage(total) }
        : { stdout_b64: req.stdout_b64, exit: req.exit };
    let entry: JournalEntry;
    try {
      entry = await ctx.backend.record({
        position: req.position,
        kind: "step",
        name: call.name,
        ordinal: call.ordinal,
        status: "done",
        result,
      });
    } catch (err) {
      if (isDeterminism(err)) return failDeterminism(ctx, err);
      throw err;
    }
    running.delete(req.position);
    return stepAnswer(readStepResult(entry), false, ctx.captureIno);
  };

  return { step, stepComplete };
};
