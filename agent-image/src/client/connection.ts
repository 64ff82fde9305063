/**
 * One connection to the agent's socket: a JSON line out, a JSON line back (socket protocol v2,
 * docs/internals.md). Several calls may share a connection; `flow step` sends `step` and later
 * `step.complete` on the same one.
 */
import { createConnection } from "node:net";
import type { Socket } from "node:net";
import { ClientError, errnoText } from "./io.js";
import { checkProtocol, parseResponse } from "./response.js";
import type { AgentResponse } from "./response.js";

/** A request body without the version: `{id, op, ...fields}`; undefined fields are left out. */
export type AgentRequest = { id: number; op: string } & Record<string, unknown>;

/** A field value that is already JSON text, written as is. */
export class RawJson {
  constructor(readonly text: string) {}
}

/** Key order as the native client writes it: v, id, op, then the op's fields. */
const requestLine = ({ id, op, ...fields }: AgentRequest): string => {
  let line = `{"v":2,"id":${id},"op":${JSON.stringify(op)}`;
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    line += `,${JSON.stringify(key)}:${value instanceof RawJson ? value.text : JSON.stringify(value)}`;
  }
  return `${line}}\n`;
};

const lost = (why: string): ClientError => new ClientError([`error: lost the connection to the agent: ${why}`]);

export class AgentConnection {
  private readonly socket: Socket;
  private chunks: Buffer[] = [];
  private hasNewline = false;
  private ended = false;
  private failure: unknown = undefined;
  private wake: (() => void) | undefined = undefined;
  /** The agent's protocol version once a hello told it; 0 before. */
  private protocol = 0;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on("data", (chunk: Buffer) => {
      this.chunks.push(chunk);
      if (chunk.includes(10)) this.hasNewline = true;
      this.wake?.();
    });
    socket.on("end", () => {
      this.ended = true;
      this.wake?.();
    });
    socket.on("error", (err) => {
      this.failure = err;
      this.wake?.();
    });
  }

  static open(path: string): Promise<AgentConnection> {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ path });
      const refused = (err: Error): void => {
        socket.destroy();
        reject(new ClientError([`error: cannot connect to the agent at ${path}: ${errnoText(err)}`]));
      };
      socket.once("error", refused);
      socket.once("connect", () => {
        socket.off("error", refused);
        resolve(new AgentConnection(socket));
      });
    });
  }

  /**
   * Sends one request and reads its answer. minProtocol > 1 asks the agent's version with a
   * hello first, on the same connection, so an old agent is never sent a call it would misread.
   */
  async call(request: AgentRequest, minProtocol = 1): Promise<AgentResponse> {
    if (minProtocol > 1 && this.protocol === 0) {
      const hello = await this.exchange({ id: 0, op: "hello" });
      this.protocol = Math.max(hello.protocol ?? 0, hello.v);
      checkProtocol(this.protocol, minProtocol);
    }
    const answer = await this.exchange(request);
    if (minProtocol > 1) checkProtocol(answer.v, minProtocol);
    return answer;
  }

  close(): void {
    this.socket.destroy();
  }

  private async exchange(request: AgentRequest): Promise<AgentResponse> {
    if (this.ended) throw lost("Broken pipe"); // what write(2) says to the native client
    this.socket.write(requestLine(request));
    return parseResponse(await this.readLine());
  }

  /** The next line without its newline; EOF after a partial line counts as its end. */
  private async readLine(): Promise<Buffer> {
    while (!this.hasNewline && !this.ended && this.failure === undefined) {
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
    const all = Buffer.concat(this.chunks);
    const nl = all.indexOf(10);
    if (nl >= 0) {
      const rest = all.subarray(nl + 1);
      this.chunks = rest.length ? [rest] : [];
      this.hasNewline = rest.includes(10);
      return all.subarray(0, nl);
    }
    if (this.failure !== undefined) throw lost(errnoText(this.failure));
    if (all.length === 0) throw new ClientError(["error: the agent closed the connection without answering"]);
    this.chunks = [];
    return all;
  }
}
