/**
 * The pipe the script's stdout goes into. `capture_ino` (docs/internals.md, "Replayed output")
 * must equal what a client in the script sees as `fstat(1).st_ino`. Node's `stdio: "pipe"` is a
 * socketpair whose two ends have different inodes, so the agent makes a FIFO instead: both ends of
 * a FIFO share the FIFO's inode. The read end is opened non-blocking first (so the write end opens
 * at once), the write end is handed to the child as fd 1 and closed here after the spawn.
 */
import { execFileSync } from "node:child_process";
import { closeSync, constants, fstatSync, openSync } from "node:fs";
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

export const openCapturePipe = (path: string): CapturePipe => {
  try {
    execFileSync("mkfifo", ["-m", "600", path], { stdio: ["ignore", "ignore", "pipe"] });
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
