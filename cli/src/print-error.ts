/**
 * How the CLI reports a failure: one line `error: <message>` on stderr, then the hint on its own
 * line, and the exit status the error code maps to (core's exitStatusOf, the one table).
 */
import { FlowError, exitStatusOf, problemLine } from "@flowsvc/core/errors";
import { printable } from "./print-format.js";
import type { Stdio } from "./print.js";

const BUG_HINT = "this is a bug in flow: please report it with the command you ran";

/**
 * A refused document's problems (details.problems of a graph's or a pipeline's refusal, sent by the
 * server or made here), one line each as `flow check` prints them; undefined for any other error.
 */
const problemLines = (details: Record<string, unknown> | undefined): string[] | undefined => {
  const problems = details?.["problems"];
  if (!Array.isArray(problems) || problems.length === 0) return undefined;
  const lines: string[] = [];
  for (const p of problems as unknown[]) {
    if (typeof p !== "object" || p === null) return undefined;
    const { path, message, line, column } = p as Record<string, unknown>;
    if (typeof path !== "string" || typeof message !== "string") return undefined;
    lines.push(problemLine(typeof line === "number" && typeof column === "number" ? { path, message, line, column } : { path, message }));
  }
  return lines;
};

/** Prints the error and returns the exit status for it. */
export const printError = (io: Stdio, err: unknown): number => {
  if (err instanceof FlowError) {
    // Only where the message is those problems joined (a refusal that wraps them, `reaction.source: ...`, keeps its words).
    const problems = problemLines(err.details);
    const joined = problems !== undefined && (err.message === problems.join("; ") || err.message === problems.join("\n"));
    const lines = joined ? problems : [err.message];
    for (const line of lines) io.note(`error: ${printable(line)}`);
    // A message that carries its hint already (core's master key error, for logs that keep messages only) is not followed by it again.
    if (err.hint && !err.message.endsWith(err.hint)) io.note(printable(err.hint));
    return exitStatusOf(err.code);
  }
  const message = err instanceof Error ? err.message : String(err);
  io.note(`error: ${printable(message)}`);
  io.note(BUG_HINT);
  return 1;
};
