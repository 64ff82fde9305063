import { PassThrough } from "node:stream";
import type { IncomingMessage } from "node:http";
import { isTerminalStatus } from "@flowsvc/core";
import { getRunStatus, readLogs, type Listener } from "@flowsvc/store";
import { JobLinePrefixer } from "@flowsvc/core/pipeline";
import type { IngestDeps } from "./deps.js";

const POLL_MS = 1000;

/**
 * How a reader follows a run (the one rule, for `flow follow`'s text stream and the console's
 * event stream): `step` runs at once and again whenever the run is nudged (NOTIFY on
 * flowsvc_logs/flowsvc_runs naming it; a nudge during a step runs it again at once) or POLL_MS
 * passed (covers a missed nudge), until it answers false or `signal` aborts. A step reads the run's
 * status first and its log after, so the step that sees a terminal status also sees its last line.
 */
export const followRun = async (
  listener: Listener,
  o: { runId: string; signal: AbortSignal },
  step: () => Promise<boolean>,
): Promise<void> => {
  let wake: (() => void) | undefined;
  let nudged = false;
  const nudge = (id: string): void => {
    if (id !== o.runId) return;
    nudged = true;
    wake?.();
  };
  const offLogs = listener.on("flowsvc_logs", nudge);
  const offRuns = listener.on("flowsvc_runs", nudge);
  const abort = (): void => wake?.();
  o.signal.addEventListener("abort", abort);
  try {
    for (;;) {
      nudged = false;
      if (o.signal.aborted || !(await step())) return;
      if (nudged || o.signal.aborted) continue;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, POLL_MS);
        wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      wake = undefined;
    }
  } finally {
    offLogs();
    offRuns();
    o.signal.removeEventListener("abort", abort);
  }
};

/** An abort signal that fires when the client goes or the stream closes. */
export const closeSignal = (client: IncomingMessage, out: PassThrough): AbortSignal => {
  const ctl = new AbortController();
  client.on("close", () => ctl.abort());
  out.on("close", () => ctl.abort());
  return ctl.signal;
};

/**
 * The run's masked log as a text stream. With `follow`, it stays open until the run is terminal
 * and everything logged before that is sent (followRun).
 */
export const streamRunLog = (deps: IngestDeps, runId: string, follow: boolean, client: IncomingMessage): PassThrough => {
  const out = new PassThrough();
  const prefixer = new JobLinePrefixer();
  const signal = closeSignal(client, out);
  let after = 0;

  const drain = async (): Promise<void> => {
    for (;;) {
      const rows = await readLogs(deps.pool, runId, after, 1000);
      for (const r of rows) out.write(prefixer.write(r.job, r.data));
      if (rows.length > 0) after = rows[rows.length - 1]!.id;
      if (rows.length < 1000) return;
    }
  };

  const run = async (): Promise<void> => {
    try {
      if (!follow) await drain();
      else
        await followRun(deps.listener, { runId, signal }, async () => {
          const status = await getRunStatus(deps.pool, runId);
          await drain();
          return status !== undefined && !isTerminalStatus(status);
        });
    } catch (err) {
      out.destroy(err as Error);
      return;
    }
    out.end();
  };
  void run();
  return out;
};
