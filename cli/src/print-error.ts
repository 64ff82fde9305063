/**
 * How the CLI reports a failure: one line `error: <message>` on stderr, then the hint on its own
 * line, and the exit status the error code maps to (core's exitStatusOf, the one table).
 */
import { FlowError, exitStatusOf } from "@flowsvc/core/errors";
import { printable } from "./print-format.js";
import type { Stdio } from "./print.js";

const BUG_HINT = "this is a bug in flow: please report it with the command you ran";

/** Prints the error and returns the exit status for it. */
export const printError = (io: Stdio, err: unknown): number => {
  if (err instanceof FlowError) {
    io.note(`error: ${printable(err.message)}`);
    // A message that carries its hint already (core's master key error, for logs that keep messages only) is not followed by it again.
    if (err.hint && !err.message.endsWith(err.hint)) io.note(printable(err.hint));
    return exitStatusOf(err.code);
  }
  const message = err instanceof Error ? err.message : String(err);
  io.note(`error: ${printable(message)}`);
  io.note(BUG_HINT);
  return 1;
};
