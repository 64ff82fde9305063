/**
 * A local run's signals: one file per signal in `signals/`, named `<stamp>-<name>.json` so the
 * names sort by arrival (local-files.ts, arrivalStamp). A signal name is a queue (spec, Script
 * semantics rule 4): each wait takes the oldest file of its name by moving it to `taken/`; the
 * rename succeeds for exactly one taker. Signals sent with no waiter simply wait in the spool.
 */
import { readFile, readdir, rename } from "node:fs/promises";
import { join } from "node:path";
import { FlowError, decideWait, waitDeadline } from "@flowsvc/core";
import { STAMPED_NAME, fileSafeName, publishStamped, waitForChange } from "./local-files.js";
import type { LocalRunDir } from "./local-run-dir.js";

export type SignalWaitResult = { readonly payload: unknown } | { readonly timed_out: true };

/** The slow poll behind the directory watch. */
const POLL_MS = 250;

interface SpooledSignal {
  readonly name: string;
  readonly payload: unknown;
}

/** Appends a signal to the run's spool. */
export const spoolSignal = async (run: LocalRunDir, name: string, payload: unknown): Promise<void> => {
  const body: SpooledSignal & { sent_at: string } = { name, payload, sent_at: new Date().toISOString() };
  await publishStamped(run.signalsDir, fileSafeName(name), `${JSON.stringify(body)}\n`);
};

const isMissing = (err: unknown): boolean => (err as NodeJS.ErrnoException | undefined)?.code === "ENOENT";

/** Takes the oldest spooled signal named `name`; undefined when there is none. */
export const takeSignal = async (run: LocalRunDir, name: string): Promise<{ payload: unknown } | undefined> => {
  const part = fileSafeName(name);
  const files = (await readdir(run.signalsDir)).filter((f) => STAMPED_NAME.exec(f)?.[2] === part).sort();
  for (const file of files) {
    const taken = join(run.takenDir, file);
    try {
      await rename(join(run.signalsDir, file), taken);
    } catch (err) {
      if (isMissing(err)) continue; // another wait took it first
      throw err;
    }
    const signal = JSON.parse(await readFile(taken, "utf8")) as Partial<SpooledSignal>;
    if (signal.name !== name) {
      throw new FlowError("internal", `the local signal file ${file} holds ${JSON.stringify(signal.name)}, not ${JSON.stringify(name)}`);
    }
    return { payload: signal.payload ?? null };
  }
  return undefined;
};

/**
 * Waits for the next signal named `name`, at most `timeoutMs` when given. Answers the payload, or
 * `{timed_out: true}` (core's decideWait, as on the server); rejects with the abort reason when
 * `signal` aborts (the run is ending).
 */
export const waitForSignal = async (
  run: LocalRunDir,
  name: string,
  timeoutMs: number | undefined,
  signal: AbortSignal,
): Promise<SignalWaitResult> => {
  const deadlineMs = waitDeadline(Date.now(), timeoutMs);
  for (;;) {
    signal.throwIfAborted();
    const arrived = await takeSignal(run, name);
    const answer = decideWait({ kind: "wait-signal", deadlineMs, arrived }, Date.now());
    if (answer.state !== "pending") return answer.result as SignalWaitResult;
    await waitForChange(run.signalsDir, Math.min(POLL_MS, (deadlineMs ?? Infinity) - Date.now()), signal);
  }
};
