/**
 * The first request by hand (http1.ts) against real servers on 127.0.0.1: it reads every framing an
 * HTTP/1.1 server may answer with (content-length, chunked with extensions and trailers, to the
 * close, 1xx first, any split of the bytes), refuses what is not HTTP, and an ApiClient's first call
 * (by hand) answers exactly what its second (node:http) answers, success or error.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer as createHttpServer } from "node:http";
import type { IncomingMessage } from "node:http";
import { createServer as createNetServer } from "node:net";
import type { AddressInfo, Server, Socket } from "node:net";
import { after, before, test } from "node:test";
import { FlowError } from "@flowsvc/core/errors";
import { createApiClient } from "./http.js";
import { ChunkedDecoder, exchangeOnce, parseAnswer } from "./http1.js";

const listen = async (server: Server): Promise<string> => {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

const ANSWERS: Record<string, string> = {
  length: 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n{"a":"\u00e9"}',
  chunked:
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n{"a"\r\n5\r\n:[1,2\r\nA\r\n,3,4,5,6]}\r\n0\r\nx-trailer: t\r\n\r\n',
  toClose: 'HTTP/1.0 200 OK\r\n\r\n{"close":true}',
  interim: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\n{}",
  noContent: "HTTP/1.1 204 No Content\r\n\r\n",
  flowError: 'HTTP/1.1 404 Not Found\r\ncontent-length: 58\r\n\r\n{"error":{"code":"not_found","message":"run r not found"}}',
  bare502: "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 3\r\n\r\nbad",
};

void test("each framing parses, whatever the split of its bytes; an incomplete one is 'more' until it ends", () => {
  const expected: Record<string, [number, string]> = {
    length: [200, '{"a":"\u00e9"}'],
    chunked: [200, '{"a":[1,2,3,4,5,6]}'],
    interim: [201, "{}"],
    noContent: [204, ""],
    flowError: [404, '{"error":{"code":"not_found","message":"run r not found"}}'],
  };
  for (const [name, [status, body]] of Object.entries(expected)) {
    const bytes = Buffer.from(ANSWERS[name]!, "utf8");
    for (let cut = 0; cut < bytes.length; cut++) assert.equal(parseAnswer(bytes.subarray(0, cut), false), "more", `${name} cut at ${cut}`);
    const parsed = parseAnswer(bytes, false);
    assert.notEqual(parsed, "more", name);
    assert.deepEqual(parsed !== "more" && [parsed.status, parsed.body.toString("utf8")], [status, body], name);
  }
  const toClose = Buffer.from(ANSWERS.toClose!);
  assert.equal(parseAnswer(toClose, false), "more");
  assert.deepEqual(parseAnswer(toClose, true), { status: 200, body: Buffer.from('{"close":true}') });
});

void test("a chunked body decodes the same fed whole or byte by byte, and is done only after its trailers", () => {
  const answer = ANSWERS.chunked!;
  const body = Buffer.from(answer.slice(answer.indexOf("\r\n\r\n") + 4), "latin1");
  const whole = new ChunkedDecoder();
  assert.equal(Buffer.concat(whole.feed(body)).toString(), '{"a":[1,2,3,4,5,6]}');
  assert.ok(whole.done);
  const bytewise = new ChunkedDecoder();
  const parts: Buffer[] = [];
  for (let i = 0; i < body.length; i++) {
    assert.equal(bytewise.done, false, `done early at ${i}`);
    parts.push(...bytewise.feed(body.subarray(i, i + 1)));
  }
  assert.ok(bytewise.done);
  assert.equal(Buffer.concat(parts).toString(), '{"a":[1,2,3,4,5,6]}');
  for (const bad of ["zz\r\n", "2\r\nabc\r\n", `${"1".repeat(9000)}`])
    assert.throws(() => new ChunkedDecoder().feed(Buffer.from(bad)), /malformed HTTP answer/, bad.slice(0, 20));
});

void test("what is not an HTTP/1.1 answer is refused, not guessed", () => {
  const bad = [
    "SSH-2.0-OpenSSH_9.6\r\n\r\n",
    "HTTP/2 200\r\n\r\n",
    "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    "HTTP/1.1 200 OK\r\ncontent-length: 1e400\r\n\r\n",
    "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nabc",
    "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n",
    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabc\r\n",
    "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
  ];
  for (const text of bad)
    assert.throws(() => parseAnswer(Buffer.from(text, "latin1"), false), /malformed HTTP answer/, JSON.stringify(text));
  assert.throws(() => parseAnswer(Buffer.from("HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nabc"), true), { code: "ECONNRESET" });
  assert.throws(() => parseAnswer(Buffer.from("HTTP/1.1 200 OK\r\n"), true), { code: "ECONNRESET", message: /^socket hang up/ });
});

let raw: Server;
let rawUrl: string;
/** The answer the raw server sends next, written a few bytes at a time; "hangup" closes after half of it. */
let next: { text: string; hangup?: boolean } = { text: "" };

before(async () => {
  raw = createNetServer((socket: Socket) => {
    socket.once("data", () => {
      const bytes = Buffer.from(next.text, "utf8");
      const upTo = next.hangup ? bytes.length >> 1 : bytes.length;
      const write = (at: number): void => {
        if (at >= upTo) {
          socket.end();
          return;
        }
        socket.write(bytes.subarray(at, at + 7), () => setImmediate(write, at + 7));
      };
      write(0);
    });
    socket.on("error", () => undefined);
  });
  rawUrl = await listen(raw);
});
after(() => raw.close());

const outcome = async (call: () => Promise<unknown>): Promise<unknown> => {
  try {
    return { value: await call() };
  } catch (err) {
    return err instanceof FlowError ? { code: err.code, message: err.message, hint: err.hint } : { other: String(err) };
  }
};

void test("an ApiClient's first call (by hand) answers what its second (node:http) answers, for every framing and error", async () => {
  for (const [name, text] of Object.entries(ANSWERS)) {
    next = { text };
    const client = createApiClient({ url: rawUrl, token: "t" });
    const first = await outcome(() => client.call("GET", "/api/v1/x"));
    const second = await outcome(() => client.call("GET", "/api/v1/x"));
    await client.close();
    assert.deepEqual(first, second, name);
  }
  for (const [name, text] of Object.entries(ANSWERS)) {
    next = { text };
    const client = createApiClient({ url: rawUrl, token: "t" });
    const streamed = async (): Promise<unknown> => {
      const pieces: Buffer[] = [];
      const result = await outcome(() => client.stream("/api/v1/x/log", (chunk) => Promise.resolve(void pieces.push(Buffer.from(chunk)))));
      return { result, text: Buffer.concat(pieces).toString("utf8") };
    };
    const [first, second] = [await streamed(), await streamed()];
    await client.close();
    assert.deepEqual(first, second, `stream ${name}`);
  }
  // A sink that fails stops a stream read by hand, with the sink's error.
  next = { text: ANSWERS.chunked! };
  const failing = createApiClient({ url: rawUrl, token: "t" });
  await assert.rejects(
    failing.stream("/log", () => Promise.reject(new Error("disk full"))),
    /disk full/,
  );
  await failing.close();
  next = { text: ANSWERS.length!, hangup: true };
  const client = createApiClient({ url: rawUrl, token: "t" });
  const cut = (await outcome(() => client.call("GET", "/x"))) as { code: string; message: string };
  assert.equal(cut.code, "unavailable");
  assert.match(cut.message, /^lost the connection to flowsvc at http:\/\/127\.0\.0\.1:\d+ \(socket hang up/);
  await client.close();
});

void test("the server sees the same request from the first call as from node:http; refused and bad ones fail as before", async () => {
  const seen: Array<Record<string, unknown>> = [];
  const server = createHttpServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/big") {
        // ~2 MB chunked, in pieces: read whole, and in one piece of work per doubling, not per chunk.
        const rows = Array.from({ length: 20_000 }, (_, i) => ({ id: `run-${i}`, tags: ["\u00e9".repeat(40)] }));
        const text = JSON.stringify(rows);
        res.writeHead(200, { "content-type": "application/json" });
        for (let at = 0; at < text.length; at += 65_536) res.write(text.slice(at, at + 65_536));
        res.end();
        return;
      }
      const { host, authorization, accept } = req.headers;
      seen.push({
        method: req.method,
        url: req.url,
        host,
        authorization,
        accept,
        type: req.headers["content-type"],
        body: Buffer.concat(chunks).toString(),
      });
      res.writeHead(201, { "content-type": "application/json" }).end('{"id":"run-1"}');
    });
  });
  const url = await listen(server);
  try {
    const body = { source: "echo \u00e9 \u{1F600}\n".repeat(20_000), env: { LD_PRELOAD: "/evil.so" } };
    const client = createApiClient({ url: `${url}/`, token: "tok" });
    assert.deepEqual(await client.call("POST", "/api/v1/runs?x=%2e%2e", body), { id: "run-1" });
    assert.deepEqual(await client.call("POST", "/api/v1/runs?x=%2e%2e", body), { id: "run-1" });
    await client.close();
    assert.equal(seen.length, 2);
    assert.deepEqual(seen[0], seen[1]);
    const big = createApiClient({ url, token: "tok" });
    const [byHand, byHttp] = [await big.call<unknown[]>("GET", "/big"), await big.call<unknown[]>("GET", "/big")];
    await big.close();
    assert.equal(byHand.length, 20_000);
    assert.deepEqual(byHand, byHttp);
    // A token node:http refuses (a header split) is refused the same way: never written by hand.
    const split = createApiClient({ url, token: "tok\r\nx-evil: 1" });
    const refused = (await outcome(() => split.call("GET", "/x"))) as { message: string };
    assert.match(refused.message, /Invalid character in header content/);
    assert.equal(seen.length, 2);
  } finally {
    server.close();
  }
  await assert.rejects(
    exchangeOnce({
      host: "127.0.0.1",
      port: 1,
      hostHeader: "127.0.0.1:1",
      method: "GET",
      path: "/",
      headers: {},
      payload: undefined,
      connectTimeoutMs: 5000,
    }),
    { code: "ECONNREFUSED" },
  );
});
