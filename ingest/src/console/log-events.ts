import { PassThrough } from "node:stream";
import type { IncomingMessage } from "node:http";
import { z } from "zod";
import { isTerminalStatus } from "@flowsvc/core";
import { getRunStatus } from "@flowsvc/store";
import type { RouteDeps } from "../deps.js";
import { closeSignal, followRun } from "../log-stream.js";

/** A comment line this often keeps proxies from closing a quiet stream. */
export const HEARTBEAT_MS = 15_000;
/** The longest line the run page is sent (a longer one is cut and says so): with its 2,000 lines, what it holds stays bounded. */
export const LOG_LINE_MAX = 16 * 1024;
/** Most lines one `lines` event carries. */
const EVENT_LINES = 1000;

/** Where a stream resumes: the number of complete lines the page has (`Last-Event-ID`, else `?after=`). */
export const LogEventsFrom = z.object({
  after: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
});

const frame = (event: string, data: unknown, id?: number): string =>
  `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * The run page's live log, as Server-Sent Events: the lines after line `after`, then each new line
 * as it is written, until the run ends; followed as `flow follow` follows (followRun), read through
 * the line index the API's line windows use (log-lines.ts), so the text is the API's (stored
 * masked). Events, each `data` one JSON value (a line's CR or NUL cannot break the framing):
 * - `lines` `{from, lines, partial, total}` with `id: <complete lines sent>`: complete lines from
 *   line `from` (1-based), and the unfinished last line (`partial`, null when there is none);
 * - `status` `{status}` when the run's status changes (the first event says the current one);
 * - `end` `{status}` once the run has ended and every line was sent; the stream then closes.
 * A comment (`: ping`) every `heartbeatMs`, after `allowed` said the reader may still read (its
 * session has not ended); when it says no, the stream closes (a reconnect then meets the login).
 */
export const streamLogEvents = (
  deps: Pick<RouteDeps, "pool" | "listener" | "logLines">,
  o: { runId: string; after: number; client: IncomingMessage; allowed: () => Promise<boolean>; heartbeatMs?: number },
): PassThrough => {
  const out = new PassThrough();
  const signal = closeSignal(o.client, out);
  let sent = o.after;
  let partial: string | null = null;
  let status: string | undefined;
  // Nothing is written once the stream has ended (the session's end can close it mid-step).
  const write = (chunk: string): void => {
    if (!out.writableEnded) out.write(chunk);
  };
  const end = (): void => {
    if (!out.writableEnded) out.end();
  };
  const beat = (): void => {
    void o.allowed().then((yes) => (yes ? write(": ping\n\n") : end()), end);
  };
  const heartbeat = setInterval(beat, o.heartbeatMs ?? HEARTBEAT_MS);
  signal.addEventListener("abort", () => clearInterval(heartbeat));
  write("retry: 2000\n\n");

  const sendLines = async (): Promise<void> => {
    const index = await deps.logLines.of(o.runId);
    for (;;) {
      const w = await index.window(deps.pool, sent + 1, EVENT_LINES, LOG_LINE_MAX);
      const last = w.partial ? w.lines.pop()! : null;
      if (w.lines.length === 0 && last === partial) return;
      write(frame("lines", { from: sent + 1, lines: w.lines, partial: last, total: w.total }, sent + w.lines.length));
      sent += w.lines.length;
      partial = last;
      if (sent + (last === null ? 0 : 1) >= w.total) return;
    }
  };

  const step = async (): Promise<boolean> => {
    const now = await getRunStatus(deps.pool, o.runId);
    await sendLines();
    if (now !== status) write(frame("status", { status: now ?? "gone" }));
    status = now;
    if (now !== undefined && !isTerminalStatus(now)) return true;
    write(frame("end", { status: now ?? "gone" }));
    return false;
  };

  void followRun(deps.listener, { runId: o.runId, signal }, step)
    .then(end)
    .catch((err: unknown) => out.destroy(err as Error))
    .finally(() => clearInterval(heartbeat));
  return out;
};
