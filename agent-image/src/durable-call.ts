/**
 * One durable call other than `step` (sleep, wait-signal, lock, unlock, activity*, spawn): it takes
 * the next position from the cursor, with the determinism check (core's matchJournal). A call the
 * claim's journal recorded as `done` is answered from the journal, with no server call; it is a
 * replay (printed nothing again on the log's pipe) unless it is the call the previous pass parked
 * on, whose result is new to this pass (JournalCursor.receivedEarlier). A call
 * that is new, or was `pending` in the claim's snapshot, goes to the backend (`/agent/v1/call`,
 * idempotent by position): `done` is answered at once; `pending` gets no answer and suspends the
 * job (OpContext.onSuspend).
 */
import type { z } from "zod";
import { matchJournal } from "@flowsvc/core";
import type { CallResponse, DurableKind } from "@flowsvc/core";
import type { CursorCall } from "./journal-cursor.js";
import type { OpContext } from "./op-kit.js";
import { failDeterminism, isDeterminism, readResult } from "./op-kit.js";
import type { HandlerResult } from "./socket-server.js";

export interface DurableCallSpec<S extends z.ZodType> {
  readonly kind: DurableKind;
  /** The name the determinism check compares (a group, an activity name, "" for positional calls). */
  readonly name: string;
  /** `args` for POST /agent/v1/call (core's CallArgsSchemas[kind]). */
  readonly args: Record<string, unknown>;
  /** How this kind's result looks in the journal. */
  readonly result: S;
  /** The client's answer for a finished call; `replay` when the answer came from the claim's journal. */
  readonly answer: (result: z.infer<S>, replay: boolean) => HandlerResult;
}

export const runDurableCall = async <S extends z.ZodType>(ctx: OpContext, spec: DurableCallSpec<S>): Promise<HandlerResult> => {
  let call: CursorCall;
  let response: CallResponse;
  try {
    call = ctx.cursor.next(spec.kind, spec.name);
    if (call.match.type === "replay") {
      const result = readResult(spec.result, spec.kind, call.position, call.match.entry.result);
      return spec.answer(result, ctx.cursor.receivedEarlier(call.position));
    }
    response = await ctx.backend.call({
      position: call.position,
      kind: spec.kind,
      name: spec.name,
      ordinal: call.ordinal,
      args: spec.args,
    });
    // The server answers what is at the position: a different call there is a determinism error too.
    matchJournal(response.entry, call, call.position);
  } catch (err) {
    if (isDeterminism(err)) return failDeterminism(ctx, err);
    throw err;
  }
  if (response.status === "pending") {
    const pending = { position: call.position, kind: spec.kind, name: spec.name, substate: response.substate, deadline: response.deadline };
    return { afterAnswer: () => ctx.onSuspend(pending) };
  }
  return spec.answer(readResult(spec.result, spec.kind, call.position, response.entry.result), false);
};
