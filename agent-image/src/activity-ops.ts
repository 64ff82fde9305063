/**
 * Fan-out (spec, "In-script primitives"): `activity` (dispatch and wait), `activity-submit`
 * (dispatch, return), `activity-collect` (wait for one child), `activity-wait-all` (wait for the
 * rest). Each is a durable call named by the activity (wait-all: ""); a child that has not ended
 * parks the run. A child's answer is its stdout and exit code, as a step's.
 */
import { z } from "zod";
import { StepResultSchema } from "@flowsvc/core";
import type { StepResult } from "@flowsvc/core";
import { runDurableCall } from "./durable-call.js";
import type { OpContext } from "./op-kit.js";
import { b64, ok, parseRequest, printAnswer } from "./op-kit.js";
import type { HandlerResult } from "./socket-server.js";

const ActivityRequest = z.object({
  name: z.string().min(1).max(512),
  argv: z.array(z.string()).min(1).max(4096),
  requires: z.array(z.string().min(1).max(64)).max(16).default([]),
});
const CollectRequest = z.object({ name: z.string().min(1).max(512) });

const AnyResult = z.unknown();
const WaitAllResult = z.object({ failed: z.number().int().nonnegative() });

/** The child's stdout (not re-emitted on replay when stdout is the capture pipe) and exit code. */
const childAnswer = (ctx: OpContext, result: StepResult, replay: boolean): HandlerResult =>
  printAnswer(ctx, result.stdout_b64, replay, {
    ...(result.error !== undefined ? { stderr: `error: ${result.error}\n` } : {}),
    exit: result.exit,
  });

export const activityOp = (ctx: OpContext, kind: "activity" | "activity-submit", raw: unknown): Promise<HandlerResult> => {
  const { name, argv, requires } = parseRequest(ActivityRequest, kind, raw);
  const args = { argv, requires };
  return kind === "activity"
    ? runDurableCall(ctx, { kind, name, args, result: StepResultSchema, answer: (r, replay) => childAnswer(ctx, r, replay) })
    : runDurableCall(ctx, { kind, name, args, result: AnyResult, answer: () => ok() });
};

export const activityCollectOp = (ctx: OpContext, raw: unknown): Promise<HandlerResult> => {
  const { name } = parseRequest(CollectRequest, "activity-collect", raw);
  return runDurableCall(ctx, {
    kind: "activity-collect",
    name,
    args: {},
    result: StepResultSchema,
    answer: (r, replay) => childAnswer(ctx, r, replay),
  });
};

/** Prints how many of this script's uncollected children failed; always exit 0. */
export const activityWaitAllOp = (ctx: OpContext): Promise<HandlerResult> =>
  runDurableCall(ctx, {
    kind: "activity-wait-all",
    name: "",
    args: {},
    result: WaitAllResult,
    answer: (r, replay) => printAnswer(ctx, b64(`${r.failed}\n`), replay, { exit: 0 }),
  });
