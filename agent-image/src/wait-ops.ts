/**
 * The waiting calls (spec, "Parked runs and waits"): `sleep`, `wait-signal`, `lock`, `unlock`.
 * Each is a durable call (durable-call.ts); the server answers `done` when it can (a queued signal,
 * a free lease, a zero sleep) and parks the run otherwise. Durations are humantime, parsed here;
 * a bad one is refused with exit 2 and never recorded.
 */
import { z } from "zod";
import { FlowError, parseDuration } from "@flowsvc/core";
import { runDurableCall } from "./durable-call.js";
import type { OpContext } from "./op-kit.js";
import { b64, fail, ok, parseRequest, printAnswer } from "./op-kit.js";
import type { HandlerResult } from "./socket-server.js";

/** Exit status of a bounded wait that timed out (spec, Errors). */
export const WAIT_TIMED_OUT_EXIT = 124;

/** Usage errors: a bad duration, a reserved signal name. */
const USAGE_EXIT = 2;

const SleepRequest = z.object({ duration: z.string().max(256) });
const WaitSignalRequest = z.object({ name: z.string().min(1).max(512), timeout: z.string().max(256).optional() });
const LockRequest = z.object({ group: z.string().min(1).max(512) });

const AnyResult = z.unknown();
const WaitSignalResult = z.object({ payload: z.unknown().optional(), timed_out: z.boolean().optional() });

/** Runs `run`; a usage error it throws before any call is made (parseDuration's, ...) is answered with exit 2. */
export const usage = (run: () => HandlerResult | Promise<HandlerResult>): Promise<HandlerResult> => {
  try {
    return Promise.resolve(run());
  } catch (err) {
    if (err instanceof FlowError && err.code === "invalid_argument") return Promise.resolve(fail(err, USAGE_EXIT));
    throw err;
  }
};

export const sleepOp = (ctx: OpContext, raw: unknown): Promise<HandlerResult> => {
  const { duration } = parseRequest(SleepRequest, "sleep", raw);
  return usage(() => {
    const ms = parseDuration(duration);
    return runDurableCall(ctx, { kind: "sleep", name: "", args: { duration_ms: ms }, result: AnyResult, answer: () => ok() });
  });
};

/** The answer to a finished wait: the payload as one line of JSON, or exit 124 when it timed out. */
export const waitSignalAnswer = (
  ctx: OpContext,
  name: string,
  result: z.infer<typeof WaitSignalResult>,
  replay: boolean,
): HandlerResult => {
  if (result.timed_out === true) return ok({ exit: WAIT_TIMED_OUT_EXIT, stderr: `flow: wait-signal ${name} timed out\n` });
  return printAnswer(ctx, b64(`${JSON.stringify(result.payload ?? null)}\n`), replay);
};

export const waitSignalOp = (ctx: OpContext, raw: unknown): Promise<HandlerResult> => {
  const { name, timeout } = parseRequest(WaitSignalRequest, "wait-signal", raw);
  return usage(() => {
    if (name.startsWith("event:")) {
      throw new FlowError(
        "invalid_argument",
        `signal names starting "event:" are reserved for event waits: ${JSON.stringify(name)} (use flow wait-event)`,
      );
    }
    const args = timeout === undefined ? {} : { timeout_ms: parseDuration(timeout) };
    return runDurableCall(ctx, {
      kind: "wait-signal",
      name,
      args,
      result: WaitSignalResult,
      answer: (result, replay) => waitSignalAnswer(ctx, name, result, replay),
    });
  });
};

/** `lock` answers once the lease is granted; `unlock` releases a bracketed lock's lease. */
export const lockOp = (ctx: OpContext, kind: "lock" | "unlock", raw: unknown): Promise<HandlerResult> => {
  const { group } = parseRequest(LockRequest, kind, raw);
  return runDurableCall(ctx, { kind, name: group, args: {}, result: AnyResult, answer: () => ok() });
};
