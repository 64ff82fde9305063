/**
 * What every socket op handler shares (docs/internals.md, "In-script socket protocol"): the
 * context it runs in, the answer builders and request parsing. The op groups (step-ops,
 * wait-ops, activity-ops, spawn-op, state-op) build on it; socket-ops dispatches to them.
 */
import type { z } from "zod";
import { FlowError, describeIssues } from "@flowsvc/core";
import type { AgentBackend } from "./backend.js";
import type { JournalCursor } from "./journal-cursor.js";
import type { Logger } from "./logger.js";
import type { HandlerResult, SocketResponse } from "./socket-server.js";
import { errorResponse } from "./socket-server.js";

/** A durable call the server parked: the run suspends on it. */
export interface PendingCall {
  readonly position: number;
  readonly kind: string;
  readonly name: string;
  /** What the run waits for (`flow status` shows it): a signal name, `awaiting_lease`, a timer. */
  readonly substate: { readonly name: string; readonly kind: string };
  /** ISO time the wait ends on its own (a timer, a bounded wait), or null. */
  readonly deadline: string | null;
}

export interface OpContext {
  readonly agentId: string;
  readonly runId: string;
  readonly captureIno: number;
  readonly cursor: JournalCursor;
  readonly backend: Pick<AgentBackend, "record" | "call" | "state" | "annotate">;
  /** `output.set` values, sent with finish (the server commits them only on success). */
  readonly outputs: Map<string, string>;
  readonly logger: Logger;
  /** The job's failure, once it has one: durable calls are refused with it. */
  readonly failure: () => FlowError | undefined;
  /** Called after the client was answered with a determinism error. */
  readonly onDeterminism: (err: FlowError) => void;
  /**
   * Called once when a durable call came back `pending`. The client gets no answer: the job runner
   * ends the script, ships the log and suspends the job; every later request goes unanswered.
   */
  readonly onSuspend: (call: PendingCall) => void;
}

export const ok = (fields: SocketResponse = {}): HandlerResult => ({ response: { ok: true, ...fields } });

export const fail = (err: FlowError, exit = 1): HandlerResult => ({ response: errorResponse(err.code, err.message, exit) });

/** Answers the error, then fails the job with it (every later durable call gets it too). */
export const failDeterminism = (ctx: OpContext, err: FlowError): HandlerResult => ({
  ...fail(err),
  afterAnswer: () => ctx.onDeterminism(err),
});

export const isDeterminism = (err: unknown): err is FlowError => err instanceof FlowError && err.code === "determinism";

/** Parses a socket request; a bad one is an invalid_argument (exit 1). */
export const parseRequest = <S extends z.ZodType>(schema: S, op: string, raw: unknown): z.infer<S> => {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new FlowError("invalid_argument", `bad ${op} request: ${describeIssues(parsed.error.issues)}`);
  return parsed.data;
};

/** The stored result of the call at `position`, as `schema` says a `kind` result looks. */
export const readResult = <S extends z.ZodType>(schema: S, kind: string, position: number, result: unknown): z.infer<S> => {
  const parsed = schema.safeParse(result ?? {});
  if (!parsed.success)
    throw new FlowError(
      "internal",
      `the journal entry at call #${position} is not a ${kind} result: ${describeIssues(parsed.error.issues)}`,
    );
  return parsed.data;
};

/**
 * An answer that prints `stdout_b64`. A replayed one carries `replay: true` and `capture_ino`: a
 * client whose stdout is the capture pipe writes nothing (the first pass already logged it).
 */
export const printAnswer = (ctx: OpContext, stdoutB64: string, replay: boolean, fields: SocketResponse = {}): HandlerResult =>
  ok({ replay, capture_ino: ctx.captureIno, stdout_b64: stdoutB64, ...fields });

export const b64 = (text: string): string => Buffer.from(text, "utf8").toString("base64");
