import { PassThrough } from "node:stream";
import type { IncomingMessage } from "node:http";
import { isTerminalStatus } from "@flowsvc/core";
import { getRunStatus, readLogs } from "@flowsvc/store";
import { JobLinePrefixer } from "@flowsvc/core/pipeline";
import type { IngestDeps } from "./deps.js";

const POLL_MS = 1000;

/**
 * The run's masked log as a text stream. With `follow`, it stays open until the run is terminal
 * and everything logged before that is sent; NOTIFY on flowsvc_logs/flowsvc_runs wakes it, a poll
 * covers a missed nudge.
 */
export const streamRunLog = (deps: IngestDeps, runId: string, follow: boolean, client: IncomingMessage): PassThrough => {
  const out = new PassThrough();
  const prefixer = new JobLinePrefixer();
  let closed = false;
  let wake: (() => void) | undefined;
  const nudge = (id: string): void => {
    if (id === runId) wake?.();
  };
  const offLogs = deps.listener.on("flowsvc_logs", nudge);
  const offRuns = deps.listener.on("flowsvc_runs", nudge);
  const close = (): void => {
    closed = true;
    wake?.();
  };
  client.on("close", close);
  out.on("close", close);

  const drain = async (after: number): Promise<number> => {
    for (;;) {
      const rows = await readLogs(deps.pool, runId, after, 1000);
      for (const r of rows) out.write(prefixer.write(r.job, r.data));
      if (rows.length > 0) after = rows[rows.length - 1]!.id;
      if (rows.length < 1000) return after;
    }
  };

  const run = async (): Promise<void> => {
    let after = 0;
    try {
      after = await drain(after);
      while (follow && !closed) {
        const status = await getRunStatus(deps.pool, runId);
        if (!status || isTerminalStatus(status)) {
          await drain(after);
          break;
        }
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, POLL_MS);
          wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        wake = undefined;
        after = await drain(after);
      }
    } catch (err) {
      out.destroy(err as Error);
      return;
    } finally {
      offLogs();
      offRuns();
    }
    out.end();
  };
  void run();
  return out;
};
