/**
 * Local locks (`flow lock <group>` in a local run): one directory per group under
 * `<state>/locks/`, and in it one entry per holder or waiter, `<stamp>-<run-id>.json`, holding the
 * run id and the pid of its `flow run`. Entries sort by arrival; the lease belongs to the oldest
 * entry whose process is alive, so waiters are served first come, first served, across processes.
 * An entry whose process is gone (a `flow run` that was killed) is skipped and removed: a dead
 * process never comes back, so removing its entry is safe from any process.
 *
 * Limits (documented for users): liveness is by pid, so a killed holder whose pid was reused by an
 * unrelated process blocks the group until that process exits (remove the entry by hand); the
 * order of two arrivals within the same microsecond is arbitrary.
 */
import { mkdir, readFile, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
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

/** True when no live entry is ahead of `mine`; removes dead entries ahead of it on the way. */
const isFirst = async (dir: string, mine: string): Promise<boolean> => {
  const ahead = (await readdir(dir)).filter((f) => STAMPED_NAME.test(f) && f < mine).sort();
  for (const file of ahead) {
    const entry = await readEntry(join(dir, file));
    if (entry === undefined) continue;
    if (isProcessAlive(entry.pid)) return false;
    await rm(join(dir, file), { force: true });
  }
  return true;
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
