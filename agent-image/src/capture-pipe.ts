/**
 * The pipe the script's stdout goes into. `capture_ino` (docs/internals.md, "Replayed output")
 * must equal what a client in the script sees as `fstat(1).st_ino`. Node's `stdio: "pipe"` is a
 * socketpair whose two ends have different inodes, so the agent makes a FIFO instead: both ends of
 * a FIFO share the FIFO's inode. The read end is opened non-blocking first (so the write end opens
 * at once), the write end is handed to the child as fd 1 and closed here after the spawn.
 *
 * Node cannot make a FIFO itself: `mkfifo` is a process, and starting one forks the agent (about
 * 5 ms of CPU on two loaded cores, with the event loop blocked). So a FIFO outlives its job: it is
 * unlinked as soon as it is made, held by an anchor descriptor, and each job opens its own read
 * and write ends through `/proc/self/fd/<anchor>`. A FIFO goes back for the next job only when its
 * reader saw end-of-file: then no process holds a write end (nothing of the last job can write
 * into the next one's log), no byte is left in it, and without a path nothing can open it again
 * but a process of the agent's own user through the agent's /proc (which could reach the agent's
 * memory just as well). A reader cut off before end-of-file (a leftover process still holds the
 * pipe) closes its FIFO for good, and the next job makes a new one. Where there is no /proc (a
 * developer's macOS running `flow run`) every pipe is a new FIFO at `path`, as before.
 */
import { execFileSync } from "node:child_process";
import { closeSync, constants, existsSync, fstatSync, openSync, unlinkSync } from "node:fs";
import { Socket } from "node:net";
import { FlowError } from "@flowsvc/core";

export interface CapturePipe {
  /** The inode clients compare their fd 1 with. */
  readonly ino: number;
  /** Give this to the child as its stdout; then call closeWriteEnd(). */
  readonly writeFd: number;
  /** The read side, as a stream (ends when every writer, the script and its children, closed it). */
  readonly reader: Socket;
  closeWriteEnd(): void;
}

/** Anchors of FIFOs whose last reader saw end-of-file: the next pipes reuse them (a job may take two: stdout, and stderr when a spawner starts its script). */
const spares: number[] = [];
const MAX_SPARES = 4;
let procFd: boolean | undefined;

const makeFifo = (path: string): void => {
  try {
    execFileSync("mkfifo", ["-m", "600", path], { stdio: ["ignore", "ignore", "pipe"] });
  } catch (err) {
    throw new FlowError("internal", `cannot make the capture pipe ${path}: ${(err as Error).message}`, {
      hint: "the agent host needs `mkfifo` (coreutils) on PATH",
      cause: err,
    });
  }
};

/** A FIFO's anchor (a read end nobody reads), unlinked: a spare one, else a new one made at `path`. */
const takeAnchor = (path: string): number => {
  const reused = spares.pop();
  if (reused !== undefined) return reused;
  makeFifo(path);
  try {
    return openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } finally {
    unlinkSync(path);
  }
};

/** When the reader closes: its FIFO is kept for the next pipe only if the reader saw end-of-file. */
const releaseAnchor = (anchor: number, drained: boolean): void => {
  if (drained && spares.length < MAX_SPARES) spares.push(anchor);
  else closeSync(anchor);
};

const pipeAt = (path: string): CapturePipe => {
  makeFifo(path);
  const readFd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeFd = openSync(path, constants.O_WRONLY);
  return pipeOf(readFd, writeFd);
};

const pipeOf = (readFd: number, writeFd: number, onClose?: (drained: boolean) => void): CapturePipe => {
  const ino = fstatSync(readFd).ino;
  const reader = new Socket({ fd: readFd, readable: true, writable: false });
  if (onClose) {
    let drained = false;
    reader.once("end", () => (drained = true));
    reader.once("close", () => onClose(drained));
  }
  let writeOpen = true;
  return {
    ino,
    writeFd,
    reader,
    closeWriteEnd: () => {
      if (writeOpen) closeSync(writeFd);
      writeOpen = false;
    },
  };
};

/** A capture pipe for one job; `path` (in the job's scratch directory) is where a new FIFO is made. */
export const openCapturePipe = (path: string): CapturePipe => {
  procFd ??= existsSync("/proc/self/fd");
  if (!procFd) return pipeAt(path);
  const anchor = takeAnchor(path);
  const end = `/proc/self/fd/${anchor}`;
  let readFd: number | undefined;
  try {
    readFd = openSync(end, constants.O_RDONLY | constants.O_NONBLOCK);
    const writeFd = openSync(end, constants.O_WRONLY);
    return pipeOf(readFd, writeFd, (drained) => releaseAnchor(anchor, drained));
  } catch (err) {
    if (readFd !== undefined) closeSync(readFd);
    closeSync(anchor);
    throw err;
  }
};
