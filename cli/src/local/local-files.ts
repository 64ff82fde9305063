/**
 * File primitives shared by the local engine's spools (signals, lock queues): arrival-ordered
 * names, atomic publication of a whole file, liveness of the process behind an entry, and a wait
 * that wakes on a directory change (with a slow poll as the fallback).
 */
import { createHash, randomBytes } from "node:crypto";
import { watch } from "node:fs";
import { link, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";

/** Names longer than this (once encoded) are replaced by a digest in file names. */
const MAX_SAFE_NAME = 160;

/**
 * A name as a file-name part: percent-encoded (no `/`, no NUL), or `%h<sha256>` when long. The
 * same name always gives the same part, so readers match on it without opening the file.
 */
export const fileSafeName = (name: string): string => {
  const encoded = encodeURIComponent(name);
  return encoded.length <= MAX_SAFE_NAME ? encoded : `%h${createHash("sha256").update(name).digest("hex")}`;
};

/**
 * An arrival stamp: microseconds since the epoch (16 digits) and 4 random hex digits. Files named
 * `<stamp>-...` sort by arrival across processes of one machine (one clock); two arrivals within
 * the same microsecond are ordered arbitrarily.
 */
export const arrivalStamp = (): string => {
  const micros = Math.floor((performance.timeOrigin + performance.now()) * 1000);
  return `${String(micros).padStart(16, "0")}${randomBytes(2).toString("hex")}`;
};

/** The stamp at the head of a spool file name, or undefined for a name that is no entry. */
export const STAMPED_NAME = /^(\d{16}[0-9a-f]{4})-(.+)\.json$/;

const isCode = (err: unknown, code: string): boolean => (err as NodeJS.ErrnoException | undefined)?.code === code;

/**
 * Writes `body` to `dir/<stamp>-<suffix>.json` atomically: readers never see a partial file, and
 * an existing file is never replaced (a stamp collision takes a new stamp). Answers the file name.
 */
export const publishStamped = async (dir: string, suffix: string, body: string): Promise<string> => {
  const tmp = join(dir, `.tmp-${process.pid}-${randomBytes(6).toString("hex")}`);
  await writeFile(tmp, body, { mode: 0o600 });
  try {
    for (;;) {
      const name = `${arrivalStamp()}-${suffix}.json`;
      try {
        await link(tmp, join(dir, name));
        return name;
      } catch (err) {
        if (!isCode(err, "EEXIST")) throw err;
      }
    }
  } finally {
    await rm(tmp, { force: true });
  }
};

/** Writes a whole file by rename: a reader sees the old content or the new, never a mix. */
export const writeFileAtomic = async (path: string, body: string): Promise<void> => {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(6).toString("hex")}`;
  try {
    await writeFile(tmp, body, { mode: 0o600 });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
};

/** True while a process with this pid exists (EPERM: it exists under another user). */
export const isProcessAlive = (pid: number): boolean => {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return isCode(err, "EPERM");
  }
};

/**
 * Resolves after a change in `dir`, after `maxMs`, or when `signal` aborts, whichever is first.
 * The poll is the fallback for file systems where watching is not supported; callers re-check
 * their condition after every wake-up, so a spurious one costs a directory read.
 */
export const waitForChange = async (dir: string, maxMs: number, signal: AbortSignal): Promise<void> => {
  if (signal.aborted) return;
  const local = new AbortController();
  const onAbort = (): void => local.abort();
  signal.addEventListener("abort", onAbort, { once: true });
  let watcher: ReturnType<typeof watch> | undefined;
  try {
    watcher = watch(dir, { persistent: false }, () => local.abort());
    watcher.on("error", () => local.abort());
  } catch {
    watcher = undefined; // no watching here: the poll alone
  }
  try {
    await sleep(Math.max(1, maxMs), undefined, { signal: local.signal }).catch(() => undefined);
  } finally {
    watcher?.close();
    signal.removeEventListener("abort", onAbort);
  }
};
