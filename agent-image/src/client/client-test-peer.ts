/**
 * Test support: a protocol-faithful agent peer for the in-script client tests. It serves socket
 * protocol v2 on a Unix socket the way docs/internals.md documents the agent: one JSON line in,
 * one JSON line out, many connections at once; `step` answers a recorded step as a replay and a
 * new one with a position and an idempotency key; `step.complete` records and answers once the
 * record is "committed". The durable calls answer as a resolved call would (a wait with nothing
 * queued and no timeout parks: no answer, like the agent). A test may replace the answer to any
 * request with `answer`.
 */
import { createServer } from "node:net";
import type { Server, Socket } from "node:net";

export type PeerRequest = Record<string, unknown>;

/** An answer object (sent with `v: 2` unless it sets v), raw text, or no answer at all. */
export type PeerAnswer = Record<string, unknown> | { raw: string } | "close" | "hang";

export interface ChildResult {
  stdout: Buffer;
  exit: number;
}

export interface StepRecord {
  stdout: Buffer;
  exit: number;
  error?: string;
}

const LIMIT = 2 * 1024 * 1024;

/**
 * The framing of a test agent: each request line of `socket` (without its newline) goes to
 * `onLine`, until the socket is destroyed; `open` holds the socket while it is connected.
 */
export const serveLines = (socket: Socket, open: Set<Socket>, onLine: (line: string) => void): void => {
  open.add(socket);
  socket.on("close", () => open.delete(socket));
  socket.on("error", () => undefined);
  let pending = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    for (let nl = pending.indexOf(10); nl >= 0 && !socket.destroyed; nl = pending.indexOf(10)) {
      const line = pending.subarray(0, nl).toString("utf8");
      pending = pending.subarray(nl + 1);
      onLine(line);
    }
  });
};

export class ProtocolPeer {
  /** Every request line as received, for comparing what two clients put on the wire. */
  readonly lines: string[] = [];
  readonly requests: PeerRequest[] = [];
  /** Recorded steps by name: a step named here is answered as a replay. */
  readonly recorded = new Map<string, StepRecord>();
  readonly outputs = new Map<string, string>();
  readonly annotations: string[] = [];
  /** Queued payloads (JSON text) per signal name; a wait takes the first. */
  readonly signals = new Map<string, string[]>();
  /** What an activity child prints and exits with, by activity name (default: nothing, 0). */
  readonly children = new Map<string, ChildResult>();
  /** Submitted and not yet collected. */
  readonly submitted = new Set<string>();
  /** Run state by `<entity>/<key>` (entity "" for the run's own). */
  readonly state = new Map<string, string>();
  /** What `emit` published, in order; the nth gets the id `evt-peer-<n>`. */
  readonly emitted: PeerRequest[] = [];
  /** Envelopes per event type for `wait-event`; a wait takes the first. */
  readonly events = new Map<string, object[]>();
  spawned = 0;
  /** The inode the peer calls its capture pipe. */
  captureIno = 0;
  /** Overrides the documented answer; return undefined to keep it. */
  answer: ((request: PeerRequest) => PeerAnswer | undefined) | undefined = undefined;

  private position = 0;
  private readonly running = new Map<number, string>();
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly path: string,
  ) {}

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
    serveLines(socket, this.sockets, (line) => this.reply(socket, line));
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

  /** What docs/internals.md says the agent answers, per op. */
  private readonly ops: Readonly<Record<string, (request: PeerRequest) => PeerAnswer>> = {
    hello: () => ({ ok: true, agent_id: "agt-peer", protocol: 2, capture_ino: this.captureIno }),
    step: (r) => this.step(String(r.name)),
    "step.complete": (r) => this.stepComplete(r),
    "output.set": (r) => {
      for (const [k, v] of Object.entries(r.values as Record<string, string>)) this.outputs.set(k, v);
      return { ok: true };
    },
    annotate: (r) => {
      this.annotations.push(String(r.markdown));
      return { ok: true };
    },
    sleep: () => ({ ok: true }),
    lock: () => ({ ok: true }),
    unlock: () => ({ ok: true }),
    "wait-signal": (r) => this.waitSignal(String(r.name), r.timeout),
    emit: (r) => {
      this.emitted.push(r);
      const id = `evt-peer-${this.emitted.length}`;
      return { ok: true, stdout_b64: Buffer.from(`${id}\n`).toString("base64"), event_id: id };
    },
    "wait-event": (r) => this.waitEvent(String(r.type), r.timeout),
    activity: (r) => this.child(String(r.name)),
    "activity-submit": (r) => {
      this.submitted.add(String(r.name));
      return { ok: true };
    },
    "activity-collect": (r) => {
      this.submitted.delete(String(r.name));
      return this.child(String(r.name));
    },
    "activity-wait-all": () => {
      const failed = [...this.submitted].filter((n) => (this.children.get(n)?.exit ?? 0) !== 0).length;
      return { ok: true, stdout_b64: Buffer.from(`${failed}\n`).toString("base64") };
    },
    spawn: () => ({ ok: true, stdout_b64: Buffer.from(`run-child-${++this.spawned}\n`).toString("base64") }),
    state: (r) => this.stateOp(r),
    call: (r) =>
      r.graph === "broken"
        ? { ok: true, exit: 1, stderr: "flow: call: child run run-child-x failed: node a failed\n" }
        : { ok: true, stdout_b64: Buffer.from(`${JSON.stringify({ called: r.node ?? r.graph ?? "definition" })}\n`).toString("base64") },
  };

  private documented(request: PeerRequest): PeerAnswer {
    const op = String(request.op);
    const handle = Object.hasOwn(this.ops, op) ? this.ops[op] : undefined;
    return handle ? handle(request) : { ok: false, error: { code: "invalid_argument", message: `unknown op ${op}` }, exit: 2 };
  }

  private waitSignal(name: string, timeout: unknown): PeerAnswer {
    const payload = this.signals.get(name)?.shift();
    if (payload !== undefined) return { ok: true, stdout_b64: Buffer.from(`${payload}\n`).toString("base64") };
    if (timeout === undefined) return "hang"; // parked: the agent would end the process group
    return { ok: true, exit: 124, stderr: `flow wait-signal: timed out after ${JSON.stringify(timeout)} waiting for ${name}\n` };
  }

  private waitEvent(type: string, timeout: unknown): PeerAnswer {
    const envelope = this.events.get(type)?.shift();
    if (envelope !== undefined) return { ok: true, stdout_b64: Buffer.from(`${JSON.stringify(envelope)}\n`).toString("base64") };
    if (timeout === undefined) return "hang";
    return { ok: true, exit: 124, stderr: `flow: wait-event ${type} timed out\n` };
  }

  private child(name: string): PeerAnswer {
    const result = this.children.get(name) ?? { stdout: Buffer.alloc(0), exit: 0 };
    return { ok: true, stdout_b64: result.stdout.toString("base64"), exit: result.exit };
  }

  private stateOp(request: PeerRequest): PeerAnswer {
    const prefix = `${typeof request.entity === "string" ? request.entity : ""}/`;
    const key = `${prefix}${String(request.key)}`;
    const out = (text: string): PeerAnswer => ({ ok: true, stdout_b64: Buffer.from(text).toString("base64") });
    switch (request.action) {
      case "get":
        return out(this.state.has(key) ? `${this.state.get(key)}\n` : "");
      case "set":
        this.state.set(key, String(request.value));
        return { ok: true };
      case "delete":
        this.state.delete(key);
        return { ok: true };
      default:
        return out(
          [...this.state]
            .filter(([k]) => k.startsWith(prefix))
            .map(([k, v]) => `${k.slice(prefix.length)}\t${v}\n`)
            .join(""),
        );
    }
  }

  private step(name: string): PeerAnswer {
    const record = this.recorded.get(name);
    this.position++;
    if (record) {
      return {
        ok: true,
        replay: true,
        capture_ino: this.captureIno,
        stdout_b64: record.stdout.toString("base64"),
        exit: record.exit,
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
