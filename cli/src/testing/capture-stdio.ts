/** For tests: a Stdio that keeps what a command writes (stdout and stderr, one entry per write or line) and reads `stdin`. */
import type { Stdio } from "../print.js";

export interface CapturedStdio {
  io: Stdio;
  /** What went to stdout: each write as text, each `out` line. */
  out: string[];
  /** The lines that went to stderr. */
  err: string[];
}

export const captureStdio = (stdin = ""): CapturedStdio => {
  const out: string[] = [];
  const err: string[] = [];
  const io: Stdio = {
    write: (d) => Promise.resolve(void out.push(String(d))),
    out: (text) => void out.push(text),
    note: (text) => void err.push(text),
    stdinIsTty: () => false,
    readStdin: () => Promise.resolve(stdin),
  };
  return { io, out, err };
};
