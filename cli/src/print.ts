/**
 * The CLI's stdio. Every byte the user CLI writes goes through a Stdio: what a script would capture
 * on stdout, what people read on stderr. Commands get one passed down (tests build their own).
 */
import type { Readable, Writable } from "node:stream";
import { formatDocument, formatTable, type Column, type OutputFormat } from "./print-format.js";

export interface Stdio {
  /** Writes bytes or text to stdout as they are; resolves once the stream can take more. */
  write(data: string | Uint8Array): Promise<void>;
  /** Writes text to stdout, ending it with a newline if it has none. */
  out(text: string): void;
  /** Writes a line for people to stderr. */
  note(text: string): void;
  /** True when stdin is a terminal (nobody piped a value in). */
  stdinIsTty(): boolean;
  /** Reads stdin to its end. */
  readStdin(): Promise<string>;
}

const withNewline = (text: string): string => (text.endsWith("\n") ? text : `${text}\n`);

/** stdin is a getter: touching process.stdin opens it, which only `secret set NAME -` needs. */
export const streamStdio = (stdin: () => Readable & { isTTY?: boolean }, stdout: Writable, stderr: Writable): Stdio => ({
  write: (data) =>
    new Promise<void>((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      stdout.once("error", onError);
      const more = stdout.write(data, () => stdout.off("error", onError));
      if (more) resolve();
      else stdout.once("drain", () => resolve());
    }),
  out: (text) => void stdout.write(withNewline(text)),
  note: (text) => void stderr.write(withNewline(text)),
  stdinIsTty: () => stdin().isTTY === true,
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of stdin()) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer));
    return Buffer.concat(chunks).toString("utf8");
  },
});

let stdoutGuarded = false;

/** process.stdout, which `flow ... | head` may close early: then the CLI stops quietly instead of crashing on EPIPE. */
export const guardStdout = (): NodeJS.WriteStream => {
  if (!stdoutGuarded) {
    stdoutGuarded = true;
    process.stdout.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EPIPE") process.exit(0);
      throw err;
    });
  }
  return process.stdout;
};

/**
 * The process's stdio, opened on first use: Node builds process.stdout and process.stderr when first
 * read (a stream for the pipe, file or terminal, ~2-4 ms), which a command then pays after its
 * request is on its way rather than before (issue 15: start-up).
 */
export const processStdio = (): Stdio => {
  let io: Stdio | undefined;
  const open = (): Stdio => (io ??= streamStdio(() => process.stdin, guardStdout(), process.stderr));
  return {
    write: (data) => open().write(data),
    out: (text) => open().out(text),
    note: (text) => open().note(text),
    stdinIsTty: () => open().stdinIsTty(),
    readStdin: () => open().readStdin(),
  };
};

/** How a list shows as a table: its columns, and the note printed to stderr when there are no rows. */
export interface ListTable<T> {
  readonly columns: ReadonlyArray<Column<T>>;
  readonly empty: string;
}

/** What a list command prints: the rows as a document (json, yaml), else a table, or `empty` to stderr when there are none. */
export const printList = <T>(io: Stdio, format: OutputFormat, rows: readonly T[], table: ListTable<T>): void => {
  if (format !== "table") io.out(formatDocument(rows, format));
  else if (rows.length === 0) io.note(table.empty);
  else io.out(formatTable(table.columns, rows));
};
