/**
 * Local locks (`flow lock <group>` in a local run): one directory per group under
 * `<state>/locks/`, and in it one entry per holder or waiter, `<stamp>-<run-id>.json`, holding the
 * run id and the pid of its `flow run`. Entries sort by arrival; the lease belongs to the oldest
 * entry whose process is alive, so waiters are served first come, first served, across processes.
 * An entry whose process is gone (a `flow run` that was killed) is skipped and removed: a dead
 * process never comes back, so removing its entry is safe from any process. Who holds the lease
 * and which entries are dropped is core's locks.ts decision (holdsLease), as for the server.
 *
 * Limits (documented for users): liveness is by pid, so a killed holder whose pid was reused by an
 * unrelated process blocks the group until that process exits (remove the entry by hand); the
 * order of two arrivals within the same microsecond is arbitrary.
 */
import { mkdir, readFile, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { holdsLease } from "@flowsvc/core";
import { STAMPED_NAME, fileSafeName, isProcessAlive, publishStamped, waitForChange } from "./local-files.js";

const POLL_MS = 250;

interface LockEntry {
  readonly run_id: string;
  readonly pid: number;
  readonly group: string;
}

export interface HeldLock {
  readonly group: string;
  release(): Promise<void>;
}

const readEntry = async (path: string): Promise<LockEntry | undefined> => {
  try {
    return JSON.parse(await readFile(path, "utf8")) as LockEntry;
  } catch {
    return undefined; // released meanwhile
  }
};

/** True when no live entry is ahead of `mine` (core's holdsLease); removes the dead entries ahead on the way. */
const isFirst = async (dir: string, mine: string): Promise<boolean> => {
  const files = (await readdir(dir)).filter((f) => STAMPED_NAME.test(f) && f < mine).sort();
  const ahead: Array<{ file: string; granted: false; live: boolean }> = [];
  for (const file of files) {
    const entry = await readEntry(join(dir, file));
    // Entries arrive in order: once one live entry is ahead, the ones behind it do not matter.
    if (entry !== undefined) ahead.push({ file, granted: false, live: isProcessAlive(entry.pid) });
    if (ahead.at(-1)?.live === true) break;
  }
  const me = { file: mine, granted: false as const, live: true };
  const first = holdsLease(ahead, me);
  for (const dead of ahead.filter((a) => !a.live)) await rm(join(dir, dead.file), { force: true });
  return first;
};

/**
 * Joins the queue of `group` and resolves once this run holds the lease. Aborting `signal` leaves
 * the queue and rejects with the abort reason.
 */
export const acquireLock = async (locksDir: string, group: string, runId: string, signal: AbortSignal): Promise<HeldLock> => {
  const dir = join(locksDir, fileSafeName(group));
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const entry: LockEntry = { run_id: runId, pid: process.pid, group };
  const mine = await publishStamped(dir, runId, `${JSON.stringify(entry)}\n`);
  const release = async (): Promise<void> => {
    await rm(join(dir, mine), { force: true });
  };
  try {
    while (!(await isFirst(dir, mine))) {
      signal.throwIfAborted();
      await waitForChange(dir, POLL_MS, signal);
    }
    signal.throwIfAborted();
  } catch (err) {
    await release();
    throw err;
  }
  return { group, release };
};
