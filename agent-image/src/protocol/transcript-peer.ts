/**
 * Test support: an agent socket that replays one case of the protocol transcript
 * (transcript.ts). It serves socket protocol v2 on a Unix socket, expects the case's request
 * frames in order, across however many connections the speaker opens, and answers each with the
 * recorded answer frame (or not at all where the transcript says the run parks). The first request
 * that is not the recorded one is kept as a diff and its connection is closed, so the speaker ends.
 */
import { createServer } from "node:net";
import type { Server, Socket } from "node:net";
import assert from "node:assert/strict";
import { requestLine } from "./transcript.js";
import type { Frame } from "./transcript.js";
import { serveLines } from "../client/client-test-peer.js";

/**
 * How request ids are compared: `exact` as recorded (the CLI clients number a connection's
 * requests 0 for hello, then 1, 2, ...), or `any-integer` (the SDKs number the requests of a process;
 * the agent does not read ids).
 */
export type IdRule = "exact" | "any-integer";

const ID = /^\{"v":2,"id":(\d+),/;

/** The received line with its id replaced by the recorded one, when the rule lets ids differ. */
const withRecordedId = (line: string, recorded: string, ids: IdRule): string => {
  const got = ID.exec(line);
  const want = ID.exec(recorded);
  if (ids === "exact" || !got || !want) return line;
  return `${want[0]}${line.slice(got[0].length)}`;
};

const clip = (text: string, from: number): string => (text.length - from > 160 ? `${text.slice(from, from + 160)}...` : text.slice(from));

/** The fields of two request objects that differ, by name. */
const fieldDiff = (sent: string, recorded: string): string => {
  let got: Record<string, unknown>;
  try {
    got = JSON.parse(sent) as Record<string, unknown>;
  } catch {
    return "  (what was sent is not JSON)";
  }
  const want = JSON.parse(recorded) as Record<string, unknown>;
  const keys = [...new Set([...Object.keys(want), ...Object.keys(got)])];
  const lines = keys
    .filter((k) => JSON.stringify(got[k]) !== JSON.stringify(want[k]))
    .map((k) => `  ${k}: sent ${JSON.stringify(got[k]) ?? "(absent)"}, recorded ${JSON.stringify(want[k]) ?? "(absent)"}`);
  return lines.length ? lines.join("\n") : "  (the same fields and values: the key order or the spelling of a value differs)";
};

/** A readable account of a request that is not the recorded one. */
export const requestDiff = (index: number, sent: string, recorded: string): string => {
  let at = 0;
  while (at < sent.length && sent[at] === recorded[at]) at++;
  const from = Math.max(0, at - 40);
  return [
    `request #${index} is not the one the transcript recorded`,
    `  sent:     ${sent}`,
    `  recorded: ${recorded}`,
    `  first difference at character ${at}: sent ...${clip(sent, from)}`,
    `                                    recorded ...${clip(recorded, from)}`,
    fieldDiff(sent, recorded),
  ].join("\n");
};

export class TranscriptPeer {
  /** Every request line as received. */
  readonly received: string[] = [];
  /** The first request that differed from the transcript, as a diff. */
  mismatch: string | undefined;
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly path: string,
    private readonly frames: readonly Frame[],
    private readonly ids: IdRule,
  ) {}

  static async start(path: string, frames: readonly Frame[], ids: IdRule): Promise<TranscriptPeer> {
    const server = createServer();
    const peer = new TranscriptPeer(server, path, frames, ids);
    server.on("connection", (socket) => peer.serve(socket));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => resolve());
    });
    return peer;
  }

  /** Every recorded request arrived (the last one may be waiting for an answer that never comes). */
  get finished(): boolean {
    return this.received.length >= this.frames.length || this.mismatch !== undefined;
  }

  /** Connections the speaker still holds open. */
  get open(): number {
    return this.sockets.size;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Fails unless the speaker sent exactly the recorded requests, all of them. */
  assertReplayed(): void {
    if (this.mismatch !== undefined) assert.fail(this.mismatch);
    if (this.received.length < this.frames.length) {
      const frame = this.frames[this.received.length];
      const next = frame ? requestLine(frame) : "";
      assert.fail(`the speaker sent ${this.received.length} of the ${this.frames.length} recorded requests; the next one is\n  ${next}`);
    }
  }

  private serve(socket: Socket): void {
    serveLines(socket, this.sockets, (line) => this.reply(socket, line));
  }

  private reply(socket: Socket, line: string): void {
    const index = this.received.length;
    this.received.push(line);
    const frame = this.frames[index];
    if (this.mismatch !== undefined || frame === undefined) {
      this.mismatch ??= `request #${index} is not in the transcript (it has ${this.frames.length}): ${line}`;
      socket.destroy();
      return;
    }
    const recorded = requestLine(frame);
    if (withRecordedId(line, recorded, this.ids) !== recorded) {
      this.mismatch = requestDiff(index, line, recorded);
      socket.destroy();
      return;
    }
    if (frame.answer !== null) socket.write(`${JSON.stringify(frame.answer)}\n`);
  }
}
