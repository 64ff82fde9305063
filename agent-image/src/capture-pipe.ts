/**
 * The pipe the script's stdout goes into. `capture_ino` (docs/internals.md, "Replayed output")
 * must equal what a client in the script sees as `fstat(1).st_ino`. Node's `stdio: "pipe"` is a
 * socketpair whose two ends have different inodes, so the agent makes a FIFO instead: both ends of
 * a FIFO share the FIFO's inode. The read end is opened non-blocking first (so the write end opens
 * at once), the write end is handed to the child as fd 1 and closed here after the spawn.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, renameSync, rmSync } from "node:fs";
import { Socket } from "node:net";
import { join } from "node:path";
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

/**
 * FIFOs made ahead, many per `mkfifo` process (a worker agent runs job after job: a process per
 * job's pipe cost the agent a fork of itself each time). Each FIFO is new and serves one job: it is
 * renamed into the job's scratch directory (same inode) and removed with it. The stock directory is
 * the agent's (0700, in the work root, where a server's start sweeps what a killed one left).
 */
export interface FifoStock {
  /** Moves a fresh FIFO to `dest`; false when it could not (the caller makes one there itself). */
  take(dest: string): boolean;
  /** Removes the stock directory (the agent is ending). */
  dispose(): void;
}

const STOCK_BATCH = 32;

export const fifoStock = (dir: string): FifoStock => {
  const free: string[] = [];
  const refill = (): void => {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const paths = Array.from({ length: STOCK_BATCH }, () => join(dir, `f-${randomBytes(8).toString("hex")}`));
    execFileSync("mkfifo", ["-m", "600", "--", ...paths], { stdio: ["ignore", "ignore", "pipe"] });
    free.push(...paths);
  };
  return {
    take: (dest) => {
      try {
        if (free.length === 0) refill();
        renameSync(free.pop()!, dest);
        // Made by this agent's user, so only that user can have swapped it: still, a FIFO it must be.
        const st = lstatSync(dest);
        if (st.isFIFO() && st.uid === process.getuid?.()) return true;
        rmSync(dest, { force: true });
        return false;
      } catch {
        return false;
      }
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
};

/** The capture pipe at `path`: a FIFO from `stock` when one is given, else one made by `mkfifo`. */
export const openCapturePipe = (path: string, stock?: FifoStock): CapturePipe => {
  try {
    if (!stock?.take(path)) execFileSync("mkfifo", ["-m", "600", path], { stdio: ["ignore", "ignore", "pipe"] });
  } catch (err) {
    throw new FlowError("internal", `cannot make the capture pipe ${path}: ${(err as Error).message}`, {
      hint: "the agent host needs `mkfifo` (coreutils) on PATH",
      cause: err,
    });
  }
  const readFd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeFd = openSync(path, constants.O_WRONLY);
  const ino = fstatSync(readFd).ino;
  const reader = new Socket({ fd: readFd, readable: true, writable: false });
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
