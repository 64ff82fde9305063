/**
 * The common part of the protocol-faithful peers (an LLM API, Slack, GitHub statuses): an HTTP
 * server on 127.0.0.1 that keeps every request it received (method, path, headers, raw body) so a
 * test can assert what reached the far side, and answers through the subclass's `handle`.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { closeLoopback, listenLoopback } from "../support/loopback.js";

export interface PeerRequest {
  method: string;
  /** The path with its query, as sent. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The body as text (UTF-8). */
  text: string;
  /** The body parsed as JSON; undefined when it is not JSON. */
  json: unknown;
}

export interface PeerAnswer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** Largest body a peer reads: the real APIs cap requests too (Anthropic at 32 MB); ours stays small. */
const BODY_MAX = 8 * 1024 * 1024;

const readBody = async (req: IncomingMessage): Promise<string> => {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > BODY_MAX) throw new Error("request body too large");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
};

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
};

export abstract class Peer {
  /** Every request received, in order. */
  readonly requests: PeerRequest[] = [];
  #server: Server | undefined;
  #url = "";

  /** `http://127.0.0.1:<port>` once started. */
  get url(): string {
    return this.#url;
  }

  protected abstract handle(req: PeerRequest): PeerAnswer | Promise<PeerAnswer>;

  async start(port = 0): Promise<this> {
    const server = createServer((req, res) => void this.#serve(req, res));
    this.#url = `http://127.0.0.1:${await listenLoopback(server, port)}`;
    this.#server = server;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server) await closeLoopback(server);
  }

  async #serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let answer: PeerAnswer;
    try {
      const text = await readBody(req);
      const request: PeerRequest = { method: req.method ?? "", path: req.url ?? "", headers: req.headers, text, json: parseJson(text) };
      this.requests.push(request);
      answer = await this.handle(request);
    } catch (e) {
      answer = { status: 500, body: { error: String(e) } };
    }
    const payload = JSON.stringify(answer.body);
    res.writeHead(answer.status, { "content-type": "application/json; charset=utf-8", ...answer.headers });
    res.end(payload);
  }
}
