/**
 * One HTTP/1.1 exchange over a fresh node:net connection, for the first request of a user command to
 * an http:// URL (http.ts): the request is written by hand and the answer read whole, so a command's
 * first request does not wait for Node to load its HTTP client (node:http, its agent, parser and
 * streams: ~2-3 ms of a ~30 ms start-up, issue 15). What it supports is what that call needs: one
 * request with `connection: close`, an answer with a content-length, chunked (trailers skipped) or
 * ending with the connection, 1xx interim answers skipped. An answer that does not parse is an error
 * (as node:http's parser would raise one). The request side is never half-closed: the server closes
 * the connection after its answer. https:// and every later request of a command go through
 * node:http or node:https as before (streaming, keep-alive).
 */
import type { Socket } from "node:net";

export interface Http1Request {
  readonly host: string;
  readonly port: number;
  /** The Host header: the URL's host (with its port unless the scheme's default). */
  readonly hostHeader: string;
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly payload: string | undefined;
  readonly connectTimeoutMs: number;
}

export interface Http1Answer {
  readonly status: number;
  readonly body: Buffer;
}

/** Characters node:http accepts in a header value and a path (it refuses the others): only such a request is written by hand. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const PATH = /^\/[\x21-\x7e]*$/;

/** True when the request can be written by hand exactly as node:http would send it (else http.ts lets node:http refuse it). */
export const isPlainRequest = (path: string, headers: Readonly<Record<string, string>>): boolean =>
  PATH.test(path) && Object.values(headers).every((v) => HEADER_VALUE.test(v));

export const requestBytes = (req: Http1Request): Buffer => {
  const lines = [`${req.method} ${req.path} HTTP/1.1`, `host: ${req.hostHeader}`];
  for (const [name, value] of Object.entries(req.headers)) lines.push(`${name}: ${value}`);
  lines.push("connection: close", "", "");
  const head = Buffer.from(lines.join("\r\n"), "latin1");
  return req.payload === undefined ? head : Buffer.concat([head, Buffer.from(req.payload, "utf8")]);
};

class MalformedAnswer extends Error {
  constructor(what: string) {
    super(`malformed HTTP answer: ${what}`);
  }
}

/** A parsed answer, "more" when the bytes so far are a prefix of one, or throws MalformedAnswer. */
type Parsed = Http1Answer | "more";

const CRLF = Buffer.from("\r\n");
const HEAD_END = Buffer.from("\r\n\r\n");

interface Head {
  readonly status: number;
  readonly headers: Map<string, string[]>;
  readonly bodyAt: number;
}

const parseHead = (buf: Buffer, from: number): Head | "more" => {
  const end = buf.indexOf(HEAD_END, from);
  if (end < 0) return "more";
  const [statusLine = "", ...lines] = buf.toString("latin1", from, end).split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(statusLine);
  if (!m) throw new MalformedAnswer(`status line ${JSON.stringify(statusLine.slice(0, 80))}`);
  const headers = new Map<string, string[]>();
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon <= 0) throw new MalformedAnswer(`header line ${JSON.stringify(line.slice(0, 80))}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
  }
  return { status: Number(m[1]), headers, bodyAt: end + HEAD_END.length };
};

/** A chunked body from `at`: the decoded bytes once its last chunk and trailers are in. */
const parseChunked = (buf: Buffer, at: number, ended: boolean): Buffer | "more" => {
  const parts: Buffer[] = [];
  for (let pos = at; ;) {
    const lineEnd = buf.indexOf(CRLF, pos);
    if (lineEnd < 0) return "more";
    const sizeText = buf.toString("latin1", pos, lineEnd).split(";")[0]!.trim();
    if (!/^[0-9a-fA-F]{1,8}$/.test(sizeText)) throw new MalformedAnswer(`chunk size ${JSON.stringify(sizeText.slice(0, 20))}`);
    const size = parseInt(sizeText, 16);
    if (size === 0) {
      // Trailers, then an empty line; a server that closes right after the last chunk is done too.
      const trailerEnd = buf.indexOf(CRLF, lineEnd + 2) === lineEnd + 2 ? lineEnd + 4 : buf.indexOf(HEAD_END, lineEnd);
      return trailerEnd >= 0 || ended ? Buffer.concat(parts) : "more";
    }
    const dataEnd = lineEnd + 2 + size;
    if (buf.length < dataEnd + 2) return "more";
    if (buf[dataEnd] !== 0x0d || buf[dataEnd + 1] !== 0x0a) throw new MalformedAnswer("chunk without its CRLF");
    parts.push(buf.subarray(lineEnd + 2, dataEnd));
    pos = dataEnd + 2;
  }
};

const contentLength = (values: string[] | undefined): number | undefined => {
  if (values === undefined) return undefined;
  const distinct = new Set(values.flatMap((v) => v.split(",")).map((v) => v.trim()));
  const [only] = distinct;
  if (distinct.size !== 1 || only === undefined || !/^\d{1,15}$/.test(only)) throw new MalformedAnswer("content-length");
  return Number(only);
};

const bodyOf = (buf: Buffer, head: Head, ended: boolean): Buffer | "more" => {
  if (head.status === 204 || head.status === 304) return Buffer.alloc(0);
  const codings = (head.headers.get("transfer-encoding") ?? []).join(",").toLowerCase();
  if (codings.trim() !== "") {
    if (!/(^|,)\s*chunked\s*$/.test(codings)) throw new MalformedAnswer(`transfer-encoding ${codings}`);
    return parseChunked(buf, head.bodyAt, ended);
  }
  const length = contentLength(head.headers.get("content-length"));
  if (length === undefined) return ended ? buf.subarray(head.bodyAt) : "more";
  if (buf.length - head.bodyAt >= length) return buf.subarray(head.bodyAt, head.bodyAt + length);
  return "more";
};

/** The connection closed too early: node:http's words and code for it. */
const hangUp = (when: string): Error => Object.assign(new Error(`socket hang up: the connection closed ${when}`), { code: "ECONNRESET" });

/** The answer in `buf` (after any 1xx interim answers), "more" while it is incomplete; throws when it cannot be one. */
export const parseAnswer = (buf: Buffer, ended: boolean): Parsed => {
  for (let from = 0; ;) {
    const head = parseHead(buf, from);
    if (head === "more") {
      if (ended) throw hangUp("before the answer's head ended");
      return "more";
    }
    if (head.status >= 100 && head.status < 200 && head.status !== 101) {
      from = head.bodyAt;
      continue;
    }
    const body = bodyOf(buf, head, ended);
    if (body === "more") {
      if (ended) throw hangUp("before the answer ended");
      return "more";
    }
    return { status: head.status, body };
  }
};

/** Sends the request on a new connection and answers the whole answer; network failures reject with their code (ECONNREFUSED, ...). */
export const exchangeOnce = async (req: Http1Request): Promise<Http1Answer> => {
  const { connect } = await import("node:net");
  return new Promise<Http1Answer>((resolve, reject) => {
    let chunks: Buffer[] = [];
    let total = 0;
    /** A parse is tried once the bytes reach this (doubling after each incomplete try, so a large answer is copied O(n) times, not O(n²)), and at the end. */
    let tryAt = 0;
    let settled = false;
    const socket: Socket = connect({ host: req.host, port: req.port });
    const finish = (err: Error | undefined, answer?: Http1Answer): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(answer!);
    };
    const timer = setTimeout(() => {
      const err = Object.assign(new Error(`connect timeout after ${req.connectTimeoutMs} ms`), { code: "ECONNECT_TIMEOUT" });
      finish(err);
    }, req.connectTimeoutMs);
    socket.once("connect", () => clearTimeout(timer));
    const read = (ended: boolean): void => {
      if (settled) return;
      const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
      chunks = [buf];
      try {
        const parsed = parseAnswer(buf, ended);
        if (parsed !== "more") finish(undefined, parsed);
        else tryAt = total * 2;
      } catch (err) {
        finish(err as Error);
      }
    };
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      total += chunk.length;
      if (total >= tryAt) read(false);
    });
    socket.once("end", () => read(true));
    // An error once the answer is complete (the server closing while a large body was still being written) changes nothing.
    socket.once("error", (err) => finish(err));
    socket.once("close", () => read(true));
    // write, not end: a server that sees the request's side closed may drop the request (node:http does unless httpAllowHalfOpen).
    socket.write(requestBytes(req));
  });
};

/** A chunked body decoded as its bytes arrive: feed() answers the data decoded so far; `done` once the last chunk and its trailers are in. */
export class ChunkedDecoder {
  private buf: Buffer = Buffer.alloc(0);
  private left = 0;
  private state: "size" | "data" | "crlf" | "trailers" | "done" = "size";

  get done(): boolean {
    return this.state === "done";
  }

  feed(bytes: Buffer): Buffer[] {
    this.buf = this.buf.length === 0 ? bytes : Buffer.concat([this.buf, bytes]);
    const out: Buffer[] = [];
    while (this.step(out));
    return out;
  }

  /** One step of the machine; false when it needs more bytes (or is done). */
  private step(out: Buffer[]): boolean {
    if (this.state === "data") {
      const piece = this.buf.subarray(0, this.left);
      if (piece.length === 0) return false;
      out.push(piece);
      this.buf = this.buf.subarray(piece.length);
      this.left -= piece.length;
      if (this.left === 0) this.state = "crlf";
      return true;
    }
    if (this.state === "crlf") {
      if (this.buf.length < 2) return false;
      if (this.buf[0] !== 0x0d || this.buf[1] !== 0x0a) throw new MalformedAnswer("chunk without its CRLF");
      this.buf = this.buf.subarray(2);
      this.state = "size";
      return true;
    }
    return this.state === "done" ? false : this.line();
  }

  /** A size line or a trailer line. */
  private line(): boolean {
    const end = this.buf.indexOf(CRLF);
    if (end < 0) {
      if (this.buf.length > 8192) throw new MalformedAnswer("a chunk-size or trailer line over 8 KiB");
      return false;
    }
    const text = this.buf.toString("latin1", 0, end);
    this.buf = this.buf.subarray(end + 2);
    if (this.state === "trailers") {
      if (text === "") this.state = "done";
      return this.state !== "done";
    }
    const sizeText = text.split(";")[0]!.trim();
    if (!/^[0-9a-fA-F]{1,8}$/.test(sizeText)) throw new MalformedAnswer(`chunk size ${JSON.stringify(sizeText.slice(0, 20))}`);
    this.left = parseInt(sizeText, 16);
    this.state = this.left === 0 ? "trailers" : "data";
    return true;
  }
}

/** An answer whose body is read as it arrives: its status and its decoded body, piece by piece (the connection ends with it). */
export interface Http1Stream {
  readonly status: number;
  readonly body: AsyncGenerator<Buffer, void>;
  /** Drops the connection (a consumer that stops early). */
  close(): void;
}

/** How the body after the head ends: by length, chunked, at the close, or empty. */
const bodyFraming = (head: Head): { kind: "length"; length: number } | { kind: "chunked" } | { kind: "close" } | { kind: "empty" } => {
  if (head.status === 204 || head.status === 304) return { kind: "empty" };
  const codings = (head.headers.get("transfer-encoding") ?? []).join(",").toLowerCase();
  if (codings.trim() !== "") {
    if (!/(^|,)\s*chunked\s*$/.test(codings)) throw new MalformedAnswer(`transfer-encoding ${codings}`);
    return { kind: "chunked" };
  }
  const length = contentLength(head.headers.get("content-length"));
  return length === undefined ? { kind: "close" } : { kind: "length", length };
};

/** Sends the request on a new connection and answers once the head is in; the body is then read as the consumer asks (backpressure). */
export const openStream = async (req: Http1Request): Promise<Http1Stream> => {
  const { connect } = await import("node:net");
  const socket: Socket = connect({ host: req.host, port: req.port });
  const timer = setTimeout(() => {
    socket.destroy(Object.assign(new Error(`connect timeout after ${req.connectTimeoutMs} ms`), { code: "ECONNECT_TIMEOUT" }));
  }, req.connectTimeoutMs);
  socket.once("connect", () => clearTimeout(timer));
  socket.once("close", () => clearTimeout(timer));
  socket.write(requestBytes(req));
  const input = socket[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const next = async (): Promise<Buffer | undefined> => {
    const n = await input.next();
    return n.done ? undefined : n.value;
  };
  let buf: Buffer = Buffer.alloc(0);
  let head: Head | "more" = "more";
  try {
    while ((head = parseHead(buf, 0)) === "more" || (head.status >= 100 && head.status < 200 && head.status !== 101)) {
      if (head !== "more") {
        buf = buf.subarray(head.bodyAt);
        continue;
      }
      const more = await next();
      if (more === undefined) throw hangUp("before the answer's head ended");
      buf = buf.length === 0 ? more : Buffer.concat([buf, more]);
    }
  } catch (err) {
    socket.destroy();
    throw err;
  }
  const framing = bodyFraming(head);
  const rest = buf.subarray(head.bodyAt);
  async function* body(): AsyncGenerator<Buffer, void> {
    try {
      if (framing.kind === "empty") return;
      if (framing.kind === "chunked") {
        const decoder = new ChunkedDecoder();
        for (let bytes: Buffer | undefined = rest; ; bytes = await next()) {
          if (bytes === undefined) throw hangUp("before the answer ended");
          for (const piece of decoder.feed(bytes)) yield piece;
          if (decoder.done) return;
        }
      }
      let left = framing.kind === "length" ? framing.length : Infinity;
      for (let bytes: Buffer | undefined = rest; left > 0; bytes = await next()) {
        if (bytes === undefined) {
          if (framing.kind === "close") return;
          throw hangUp("before the answer ended");
        }
        const piece = bytes.subarray(0, Math.min(bytes.length, left));
        left -= piece.length;
        if (piece.length > 0) yield piece;
      }
    } finally {
      socket.destroy();
    }
  }
  return { status: head.status, body: body(), close: () => socket.destroy() };
};
