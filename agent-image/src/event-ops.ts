/**
 * The event bus inside a script (spec, "In-script primitives", "Events"): `emit` and `wait-event`.
 *
 * `emit` is a durable call checkpointed by position (its name is ""): the server records the event
 * and answers `done` with its id; a replay answers the recorded id with no server call, so a
 * replayed emit resolves to the same event and the first attempt's payload stands.
 *
 * `wait-event` parks (name = the type) until the next event of that type after the wait began,
 * then prints the whole envelope as one line of JSON; a bounded wait that times out exits 124.
 * A malformed type (or a reserved one on emit), and a payload the bus cannot store as sent (1e400,
 * nesting over 128, a NUL), are refused with exit 2 and never recorded.
 */
import { z } from "zod";
import { EMIT_BODY_LIMIT, FlowError, assertEmittable, assertStorableJson, parseDuration, validateEventType } from "@flowsvc/core";
import { runDurableCall } from "./durable-call.js";
import type { OpContext } from "./op-kit.js";
import { b64, ok, parseRequest, printAnswer } from "./op-kit.js";
import type { HandlerResult } from "./socket-server.js";
import { WAIT_TIMED_OUT_EXIT, usage } from "./wait-ops.js";

const EmitRequest = z.object({
  type: z.string().max(256),
  key: z.string().max(4096).nullable().optional(),
  payload: z.unknown().optional(),
});
const WaitEventRequest = z.object({ type: z.string().max(256), timeout: z.string().max(256).optional() });

const EmitResult = z.object({ event_id: z.string().min(1) });
const WaitEventResult = z.object({ envelope: z.unknown().optional(), timed_out: z.boolean().optional() });

/** A subject: 1-512 characters (core's CallArgsSchemas.emit). */
const KEY_LIMIT = 512;

const checkKey = (key: string | null | undefined): string | null => {
  if (key === undefined || key === null) return null;
  if (key.length === 0 || key.length > KEY_LIMIT) {
    throw new FlowError("invalid_argument", `key: a subject must be 1-${KEY_LIMIT} characters, got ${key.length}`);
  }
  return key;
};

/** The emit as the HTTP route would take it: at most 2 MiB (spec, Limits). */
const checkSize = (args: { type: string; key: string | null; payload: unknown }): void => {
  const bytes = Buffer.byteLength(JSON.stringify(args));
  if (bytes > EMIT_BODY_LIMIT) {
    throw new FlowError("payload_too_large", `the event is ${bytes} bytes, ${bytes - EMIT_BODY_LIMIT} bytes over the 2 MiB emit limit`, {
      hint: "pass a reference (an artifact, a URL) instead of the payload",
    });
  }
};

export const emitOp = (ctx: OpContext, raw: unknown): Promise<HandlerResult> => {
  const req = parseRequest(EmitRequest, "emit", raw);
  return usage(() => {
    const args = { type: assertEmittable(req.type), key: checkKey(req.key), payload: req.payload ?? null };
    // Before the size (its stringify would overflow on deep nesting): a number past double range
    // arrives here as Infinity and would be recorded as null, which the sender did not send.
    assertStorableJson(args.payload, "payload");
    checkSize(args);
    return runDurableCall(ctx, {
      kind: "emit",
      name: "",
      args,
      result: EmitResult,
      answer: (r, replay) => printAnswer(ctx, b64(`${r.event_id}\n`), replay, { event_id: r.event_id }),
    });
  });
};

/** The answer to a finished event wait: the envelope as one line of JSON, or exit 124 when it timed out. */
const waitEventAnswer = (ctx: OpContext, type: string, result: z.infer<typeof WaitEventResult>, replay: boolean): HandlerResult => {
  if (result.timed_out === true) return ok({ exit: WAIT_TIMED_OUT_EXIT, stderr: `flow: wait-event ${type} timed out\n` });
  return printAnswer(ctx, b64(`${JSON.stringify(result.envelope ?? null)}\n`), replay);
};

export const waitEventOp = (ctx: OpContext, raw: unknown): Promise<HandlerResult> => {
  const { type, timeout } = parseRequest(WaitEventRequest, "wait-event", raw);
  return usage(() => {
    validateEventType(type);
    const args = timeout === undefined ? {} : { timeout_ms: parseDuration(timeout) };
    return runDurableCall(ctx, {
      kind: "wait-event",
      name: type,
      args,
      result: WaitEventResult,
      answer: (result, replay) => waitEventAnswer(ctx, type, result, replay),
    });
  });
};
