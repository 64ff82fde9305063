/**
 * The ops of socket protocol v2 (docs/internals.md): `hello`, `step`, `step.complete`,
 * `output.set`, `annotate`. Durable calls take positions from the JournalCursor; a recorded call
 * is answered from the journal, a new one is recorded over the agent API before it is answered.
 * A determinism error is answered to the client, then reported through `onDeterminism` (the job
 * fails); from then on every durable call gets the same error.
 */
import { z } from "zod";
import {
  FlowError, SOCKET_PROTOCOL_VERSION, STEP_OUTPUT_LIMIT, StepResultSchema, describeIssues, stepOutputTooLargeMessage,
} from "@flowsvc/core";
import type { JournalEntry, RecordRequest, StepResult } from "@flowsvc/core";
import type { JournalCursor } from "./journal-cursor.js";
import { idempotencyKeyFor } from "./journal-cursor.js";
import type { Logger } from "./logger.js";
import type { HandlerResult, SocketHandler, SocketResponse } from "./socket-server.js";
import { errorResponse } from "./socket-server.js";

export interface OpContext {
  readonly agentId: string;
  readonly runId: string;
  readonly captureIno: number;
  readonly cursor: JournalCursor;
  readonly api: {
    record(body: RecordRequest): Promise<JournalEntry>;
    annotate(markdown: string): Promise<void>;
  };
  /** `output.set` values, sent with finish (the server commits them only on success). */
  readonly outputs: Map<string, string>;
  readonly logger: Logger;
  /** The job's failure, once it has one: durable calls are refused with it. */
  readonly failure: () => FlowError | undefined;
  /** Called after the client was answered with a determinism error. */
  readonly onDeterminism: (err: FlowError) => void;
}

const StepRequest = z.object({ name: z.string().min(1).max(512), label: z.string().max(1024).optional() });
const StepCompleteRequest = z.object({
  position: z.number().int().nonnegative(),
  stdout_b64: z.string(),
  exit: z.number().int(),
  overflow_bytes: z.number().int().nonnegative().optional(),
});
const OutputSetRequest = z.object({ values: z.record(z.string().min(1).max(256), z.string()) });
const AnnotateRequest = z.object({ markdown: z.string().min(1).max(64 * 1024) });

/** All `output.set` values of a job together: they travel in the finish body (1 MiB at the server). */
const OUTPUTS_LIMIT = 256 * 1024;

const OPS = ["hello", "step", "step.complete", "output.set", "annotate"] as const;

const ok = (fields: SocketResponse = {}): HandlerResult => ({ response: { ok: true, ...fields } });
const fail = (err: FlowError, exit = 1): HandlerResult => ({ response: errorResponse(err.code, err.message, exit) });

const parse = <S extends z.ZodType>(schema: S, op: string, raw: unknown): z.infer<S> => {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new FlowError("invalid_argument", `bad ${op} request: ${describeIssues(parsed.error.issues)}`);
  return parsed.data;
};

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

const readStepResult = (entry: JournalEntry): StepResult => {
  const parsed = StepResultSchema.safeParse(entry.result);
  if (!parsed.success) throw new FlowError("internal", `the journal entry at call #${entry.position} is not a step result`);
  return parsed.data;
};

export const createOpHandler = (ctx: OpContext): SocketHandler => {
  /** Steps handed out as new and not yet completed, by position. */
  const running = new Map<number, { name: string; ordinal: number }>();

  const determinism = (err: FlowError): HandlerResult => ({ ...fail(err), afterAnswer: () => ctx.onDeterminism(err) });

  const step = (raw: unknown): HandlerResult => {
    const { name } = parse(StepRequest, "step", raw);
    let call;
    try {
      call = ctx.cursor.next("step", name);
    } catch (err) {
      if (err instanceof FlowError && err.code === "determinism") return determinism(err);
      throw err;
    }
    if (call.match.type === "replay") return stepAnswer(readStepResult(call.match.entry), true, ctx.captureIno);
    running.set(call.position, { name, ordinal: call.ordinal });
    return ok({ replay: false, position: call.position, idempotency_key: idempotencyKeyFor(ctx.runId, call.position), capture_ino: ctx.captureIno });
  };

  const stepComplete = async (raw: unknown): Promise<HandlerResult> => {
    const req = parse(StepCompleteRequest, "step.complete", raw);
    const call = running.get(req.position);
    if (!call) throw new FlowError("invalid_argument", `no step is running at call #${req.position}`);
    // overflow_bytes is the whole count of the step's stdout, sent once it passed the limit.
    const total = Math.max(req.overflow_bytes ?? 0, Buffer.byteLength(req.stdout_b64, "base64"));
    const result: StepResult = total > STEP_OUTPUT_LIMIT
      ? { stdout_b64: "", exit: 1, error: stepOutputTooLargeMessage(total) }
      : { stdout_b64: req.stdout_b64, exit: req.exit };
    let entry: JournalEntry;
    try {
      entry = await ctx.api.record({ position: req.position, kind: "step", name: call.name, ordinal: call.ordinal, status: "done", result });
    } catch (err) {
      if (err instanceof FlowError && err.code === "determinism") return determinism(err);
      throw err;
    }
    running.delete(req.position);
    return stepAnswer(readStepResult(entry), false, ctx.captureIno);
  };

  const outputSet = (values: Record<string, string>): HandlerResult => {
    const next = new Map([...ctx.outputs, ...Object.entries(values)]);
    const size = [...next].reduce((n, [k, v]) => n + k.length + v.length, 0);
    if (size > OUTPUTS_LIMIT) {
      throw new FlowError("payload_too_large", `outputs would be ${size} characters, over the ${OUTPUTS_LIMIT / 1024} KiB limit`, { hint: "pass a reference (an artifact, a URL) instead of the value" });
    }
    for (const [k, v] of Object.entries(values)) ctx.outputs.set(k, v);
    return ok();
  };

  const dispatch = async (op: string, raw: Record<string, unknown>): Promise<HandlerResult> => {
    if (op === "hello") return ok({ agent_id: ctx.agentId, protocol: SOCKET_PROTOCOL_VERSION, capture_ino: ctx.captureIno });
    const failure = ctx.failure();
    if (failure) return fail(failure);
    switch (op) {
      case "step":
        return step(raw);
      case "step.complete":
        return stepComplete(raw);
      case "output.set":
        return outputSet(parse(OutputSetRequest, op, raw).values);
      case "annotate":
        await ctx.api.annotate(parse(AnnotateRequest, op, raw).markdown);
        return ok();
      default:
        throw new FlowError("invalid_argument", `this agent does not know the op ${JSON.stringify(op)} (socket protocol ${SOCKET_PROTOCOL_VERSION}: ${OPS.join(", ")})`);
    }
  };

  return async (request) => {
    if (request["v"] !== SOCKET_PROTOCOL_VERSION) {
      return fail(new FlowError("invalid_argument", `this agent speaks socket protocol ${SOCKET_PROTOCOL_VERSION}; the request has v=${JSON.stringify(request["v"] ?? null)}`));
    }
    const op = typeof request["op"] === "string" ? request["op"] : "";
    try {
      return await dispatch(op, request);
    } catch (err) {
      if (err instanceof FlowError) return fail(err);
      ctx.logger.error({ err, op }, "socket call failed");
      return fail(new FlowError("internal", `the agent could not complete ${op}: ${(err as Error).message}`));
    }
  };
};
