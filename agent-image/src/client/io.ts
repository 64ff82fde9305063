/**
 * Output for the in-script client. It writes with fs.writeSync on fds 1 and 2 and never touches
 * process.stdout: that getter would turn a shared pipe non-blocking for every process on it,
 * and a synchronous write gives the step body's output natural backpressure.
 */
import { readFileSync, writeSync } from "node:fs";

/** An error of the client itself: the lines to print on stderr and the exit status. */
export class ClientError extends Error {
  override readonly name = "ClientError";
  readonly lines: readonly string[];
  readonly exitCode: number;

  constructor(lines: readonly string[], exitCode = 1) {
    super(lines[0] ?? "error");
    this.lines = lines;
    this.exitCode = exitCode;
  }
}

/** glibc's strerror text for the errors a client meets, so both clients print the same. */
const ERRNO_TEXT: Readonly<Record<string, string>> = {
  E2BIG: "Argument list too long",
  EACCES: "Permission denied",
  EAGAIN: "Resource temporarily unavailable",
  EBADF: "Bad file descriptor",
  ECONNREFUSED: "Connection refused",
  ECONNRESET: "Connection reset by peer",
  EISDIR: "Is a directory",
  ELOOP: "Too many levels of symbolic links",
  ENAMETOOLONG: "File name too long",
  ENOENT: "No such file or directory",
  ENOEXEC: "Exec format error",
  ENOTDIR: "Not a directory",
  ENOTSOCK: "Socket operation on non-socket",
  EPERM: "Operation not permitted",
  EPIPE: "Broken pipe",
  EPROTOTYPE: "Protocol wrong type for socket",
  ETXTBSY: "Text file busy",
};

export const errorCode = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | null)?.code;

export const errnoText = (err: unknown): string => {
  const code = errorCode(err);
  if (code !== undefined) return ERRNO_TEXT[code] ?? code;
  return err instanceof Error ? err.message : String(err);
};

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** Writes all of data to fd; false when the reader is gone (EPIPE) or fd is unusable. */
export const writeAll = (fd: number, data: Uint8Array): boolean => {
  let offset = 0;
  while (offset < data.length) {
    try {
      offset += writeSync(fd, data, offset, data.length - offset);
    } catch (err) {
      if (errorCode(err) !== "EAGAIN") return false;
      Atomics.wait(sleepCell, 0, 0, 1); // someone made the fd non-blocking: wait for room
    }
  }
  return true;
};

/** Writes each text as a line on fd. */
export const say = (fd: number, ...lines: readonly string[]): void => {
  writeAll(fd, Buffer.from(lines.map((l) => `${l}\n`).join(""), "utf8"));
};

/** All of stdin (fd 0), as the native client's read_stdin reads it. */
export const readStdin = (): Buffer => {
  try {
    return readFileSync(0);
  } catch (err) {
    throw new ClientError([`error: cannot read stdin: ${errnoText(err)}`]);
  }
};

/** All of a file, as the native client's read_all reads it. */
export const readInputFile = (path: string): Buffer => {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ClientError([`error: cannot read ${path}: ${errnoText(err)}`]);
  }
};
