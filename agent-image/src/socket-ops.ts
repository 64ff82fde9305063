/**
 * The ops of socket protocol v2 (docs/internals.md, "In-script socket protocol"), dispatched to
 * their groups: steps (step-ops), waits (wait-ops), the event bus (event-ops), fan-out
 * (activity-ops), spawn, state, and the small ones here (`hello`, `output.set`, `annotate`).
 *
 * Durable calls take positions from the JournalCursor; a recorded call is answered from the
 * journal, a new one goes to the backend before it is answered. A determinism error is answered to
 * the client, then reported through `onDeterminism` (the job fails); from then on every call gets
 * the same error. Once a call came back `pending` (the run parks), no request is answered again.
 */
import { z } from "zod";
import { ANNOTATION_MAX, FlowError, SOCKET_PROTOCOL_VERSION } from "@flowsvc/core";
import { activityCollectOp, activityOp, activityWaitAllOp } from "./activity-ops.js";
import { emitOp, waitEventOp } from "./event-ops.js";
import type { OpContext, PendingCall } from "./op-kit.js";
import { fail, ok, parseRequest } from "./op-kit.js";
import type { HandlerResult, SocketHandler } from "./socket-server.js";
import { spawnOp } from "./spawn-op.js";
import { callOp } from "./call-op.js";
import { stateOp } from "./state-op.js";
import { createStepOps } from "./step-ops.js";
import { lockOp, sleepOp, usage, waitSignalOp } from "./wait-ops.js";

export type { OpContext, PendingCall } from "./op-kit.js";

const OutputSetRequest = z.object({ values: z.record(z.string().min(1).max(256), z.string()) });
const AnnotateRequest = z.object({ markdown: z.string() });

/** `flow annotate`'s note: not empty, within the server's limit; refused as a usage error that says which. */
const checkNote = (markdown: string): string => {
  if (markdown === "")
    throw new FlowError("invalid_argument", "flow annotate: the note is empty: give the markdown, or - to read it from stdin");
  if (markdown.length > ANNOTATION_MAX)
    throw new FlowError(
      "invalid_argument",
      `flow annotate: the note is ${markdown.length} characters, ${markdown.length - ANNOTATION_MAX} over the limit of ${ANNOTATION_MAX}`,
    );
  return markdown;
};

/** All `output.set` values of a job together: they travel in the finish body (1 MiB at the server). */
const OUTPUTS_LIMIT = 256 * 1024;

/** No answer: the run is parking and the script is about to be ended. */
const SILENT: HandlerResult = {};

const outputSet = (ctx: OpContext, values: Record<string, string>): HandlerResult => {
  const next = new Map([...ctx.outputs, ...Object.entries(values)]);
  const size = [...next].reduce((n, [k, v]) => n + k.length + v.length, 0);
  if (size > OUTPUTS_LIMIT) {
    throw new FlowError("payload_too_large", `outputs would be ${size} characters, over the ${OUTPUTS_LIMIT / 1024} KiB limit`, {
      hint: "pass a reference (an artifact, a URL) instead of the value",
    });
  }
  for (const [k, v] of Object.entries(values)) ctx.outputs.set(k, v);
  return ok();
};

export const createOpHandler = (context: OpContext): SocketHandler => {
  let parked = false;
  const ctx: OpContext = {
    ...context,
    onSuspend: (call: PendingCall) => {
      if (parked) return;
      parked = true;
      context.onSuspend(call);
    },
  };
  const steps = createStepOps(ctx);

  type Op = (raw: Record<string, unknown>) => HandlerResult | Promise<HandlerResult>;
  const ops: Readonly<Record<string, Op>> = {
    step: (raw) => steps.step(raw),
    "step.complete": (raw) => steps.stepComplete(raw),
    "output.set": (raw) => outputSet(ctx, parseRequest(OutputSetRequest, "output.set", raw).values),
    annotate: (raw) =>
      usage(() => {
        const note = checkNote(parseRequest(AnnotateRequest, "annotate", raw).markdown);
        return ctx.backend.annotate(note).then(() => ok());
      }),
    sleep: (raw) => sleepOp(ctx, raw),
    "wait-signal": (raw) => waitSignalOp(ctx, raw),
    "wait-event": (raw) => waitEventOp(ctx, raw),
    emit: (raw) => emitOp(ctx, raw),
    lock: (raw) => lockOp(ctx, "lock", raw),
    unlock: (raw) => lockOp(ctx, "unlock", raw),
    activity: (raw) => activityOp(ctx, "activity", raw),
    "activity-submit": (raw) => activityOp(ctx, "activity-submit", raw),
    "activity-collect": (raw) => activityCollectOp(ctx, raw),
    "activity-wait-all": () => activityWaitAllOp(ctx),
    spawn: (raw) => spawnOp(ctx, raw),
    call: (raw) => callOp(ctx, raw),
    state: (raw) => stateOp(ctx, raw),
  };

  const dispatch = async (op: string, raw: Record<string, unknown>): Promise<HandlerResult> => {
    if (op === "hello") return ok({ agent_id: ctx.agentId, protocol: SOCKET_PROTOCOL_VERSION, capture_ino: ctx.captureIno });
    const failure = ctx.failure();
    if (failure) return fail(failure);
    const handle = Object.hasOwn(ops, op) ? ops[op] : undefined;
    if (!handle) {
      throw new FlowError(
        "invalid_argument",
        `this agent does not know the op ${JSON.stringify(op)} (socket protocol ${SOCKET_PROTOCOL_VERSION}: ${["hello", ...Object.keys(ops)].join(", ")})`,
      );
    }
    return handle(raw);
  };

  return async (request) => {
    if (parked) return SILENT;
    if (request["v"] !== SOCKET_PROTOCOL_VERSION) {
      return fail(
        new FlowError(
          "invalid_argument",
          `this agent speaks socket protocol ${SOCKET_PROTOCOL_VERSION}; the request has v=${JSON.stringify(request["v"] ?? null)}`,
        ),
      );
    }
    const op = typeof request["op"] === "string" ? request["op"] : "";
    try {
      const result = await dispatch(op, request);
      // A call answered after another one parked the run: the script is being ended, say nothing.
      return parked && result.response !== undefined ? SILENT : result;
    } catch (err) {
      if (parked) return SILENT;
      if (err instanceof FlowError) return fail(err);
      ctx.logger.error({ err, op }, "socket call failed");
      return fail(new FlowError("internal", `the agent could not complete ${op}: ${(err as Error).message}`));
    }
  };
};
