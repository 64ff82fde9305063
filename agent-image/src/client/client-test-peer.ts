/**
 * Test support: a protocol-faithful agent peer for the in-script client tests. It serves socket
 * protocol v2 on a Unix socket the way docs/internals.md documents the agent: one JSON line in,
 * one JSON line out, many connections at once; `step` answers a recorded step as a replay and a
 * new one with a position and an idempotency key; `step.complete` records and answers once the
 * record is "committed". A test may replace the answer to any request with `answer`.
 */
import { createServer } from "node:net";
import type { Server, Socket } from "node:net";

export type PeerRequest = Record<string, unknown>;

/** An answer object (sent with `v: 2` unless it sets v), raw text, or no answer at all. */
export type PeerAnswer = Record<string, unknown> | { raw: string } | "close" | "hang";

export interface StepRecord {
  stdout: Buffer;
  exit: number;
  error?: string;
}

const LIMIT = 2 * 1024 * 1024;

export class ProtocolPeer {
  /** Every request line as received, for comparing what two clients put on the wire. */
  readonly lines: string[] = [];
  readonly requests: PeerRequest[] = [];
  /** Recorded steps by name: a step named here is answered as a replay. */
  readonly recorded = new Map<string, StepRecord>();
  readonly outputs = new Map<string, string>();
  readonly annotations: string[] = [];
  /** The inode the peer calls its capture pipe. */
  captureIno = 0;
  /** Overrides the documented answer; return undefined to keep it. */
  answer: ((request: PeerRequest) => PeerAnswer | undefined) | undefined = undefined;

  private position = 0;
  private readonly running = new Map<number, string>();
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly server: Server, readonly path: string) {}

  static async start(path: string): Promise<ProtocolPeer> {
    const server = createServer();
    const peer = new ProtocolPeer(server, path);
    server.on("connection", (socket) => peer.serve(socket));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => resolve());
    });
    return peer;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private serve(socket: Socket): void {
    this.sockets.add(socket);
    socket.on("close", () => this.sockets.delete(socket));
    socket.on("error", () => undefined);
    let pending = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (let nl = pending.indexOf(10); nl >= 0; nl = pending.indexOf(10)) {
        const line = pending.subarray(0, nl).toString("utf8");
        pending = pending.subarray(nl + 1);
        this.reply(socket, line);
      }
    });
  }

  private reply(socket: Socket, line: string): void {
    this.lines.push(line);
    const request = JSON.parse(line) as PeerRequest;
    this.requests.push(request);
    const answer = this.answer?.(request) ?? this.documented(request);
    if (answer === "hang") return;
    if (answer === "close") {
      socket.end();
      return;
    }
    socket.write("raw" in answer && typeof answer.raw === "string" ? answer.raw : `${JSON.stringify({ v: 2, ...answer })}\n`);
  }

  /** What docs/internals.md says the agent answers. */
  private documented(request: PeerRequest): PeerAnswer {
    switch (request.op) {
      case "hello":
        return { ok: true, agent_id: "agt-peer", protocol: 2, capture_ino: this.captureIno };
      case "step":
        return this.step(String(request.name));
      case "step.complete":
        return this.stepComplete(request);
      case "output.set":
        for (const [k, v] of Object.entries(request.values as Record<string, string>)) this.outputs.set(k, v);
        return { ok: true };
      case "annotate":
        this.annotations.push(String(request.markdown));
        return { ok: true };
      default:
        return { ok: false, error: { code: "invalid_argument", message: `unknown op ${String(request.op)}` }, exit: 2 };
    }
  }

  private step(name: string): PeerAnswer {
    const record = this.recorded.get(name);
    this.position++;
    if (record) {
      return {
        ok: true, replay: true, capture_ino: this.captureIno, stdout_b64: record.stdout.toString("base64"), exit: record.exit,
        ...(record.error !== undefined ? { stderr: `error: ${record.error}\n` } : {}),
      };
    }
    this.running.set(this.position, name);
    return { ok: true, replay: false, position: this.position, idempotency_key: `idem-${this.position}`, capture_ino: this.captureIno };
  }

  private stepComplete(request: PeerRequest): PeerAnswer {
    const name = this.running.get(request.position as number);
    if (name === undefined) return { ok: false, error: { code: "invalid_argument", message: "no step is running there" } };
    const total = typeof request.overflow_bytes === "number" ? request.overflow_bytes : 0;
    const exit = request.exit as number;
    if (total > LIMIT) {
      const error = `step output is ${total} bytes, ${total - LIMIT} bytes over the 2 MiB limit`;
      this.recorded.set(name, { stdout: Buffer.alloc(0), exit: 1, error });
      return { ok: false, error: { code: "step_output_too_large", message: error }, exit: 1 };
    }
    this.recorded.set(name, { stdout: Buffer.from(request.stdout_b64 as string, "base64"), exit });
    return { ok: true, exit };
  }
}
