import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { LogChunk } from "@flowsvc/core";
import { AgentApiClient } from "./agent-api-client.js";
import { LogShipper, splitText } from "./log-shipper.js";
import { silentLogger } from "./logger.js";

/** A peer for the log route only: answers each request with what `behave` says. */
const peer = async (behave: (n: number, req: IncomingMessage, res: ServerResponse, chunks: LogChunk[]) => void) => {
  let n = 0;
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => behave(n++, req, res, (JSON.parse(body) as { chunks: LogChunk[] }).chunks));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, requests: () => n, close: () => new Promise<void>((r) => server.close(() => r())) };
};

void test("output lands in order and complete when the server fails, drops connections and comes back", async () => {
  const received: LogChunk[] = [];
  const p = await peer((n, _req, res, chunks) => {
    if (n === 0 || n === 2)
      return void res.writeHead(503, { "content-type": "application/json" }).end('{"error":{"code":"unavailable","message":"db down"}}');
    if (n === 1 || n === 4) return void res.socket?.destroy();
    received.push(...chunks);
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  const api = new AgentApiClient({ serverUrl: p.url, token: "t", logger: silentLogger, minDelayMs: 5, maxDelayMs: 20 });
  const shipper = new LogShipper({ send: (c) => api.log(c), logger: silentLogger, intervalMs: 5, batchChars: 100 });
  let expected = "";
  const byStream = { stdout: "", stderr: "" };
  for (let i = 0; i < 300; i++) {
    const line = `line ${i}\n`;
    const stream = i % 7 === 0 ? "stderr" : "stdout";
    expected += line;
    byStream[stream] += line;
    shipper.push(stream, line);
    if (i % 50 === 0) await new Promise((r) => setTimeout(r, 3));
  }
  await shipper.flush();
  await api.close();
  await p.close();
  assert.ok(p.requests() > 5);
  assert.equal(received.map((c) => c.data).join(""), expected);
  assert.equal(shipper.backlog, 0);
  for (const stream of ["stdout", "stderr"] as const) {
    assert.equal(
      received
        .filter((c) => c.stream === stream)
        .map((c) => c.data)
        .join(""),
      byStream[stream],
      stream,
    );
  }
});

void test("a lost lease stops shipping and tells the job once", async () => {
  let lost = 0;
  const p = await peer(
    (_n, _req, res) =>
      void res.writeHead(409, { "content-type": "application/json" }).end('{"error":{"code":"job_lost","message":"gone"}}'),
  );
  const abort = new AbortController();
  const api = new AgentApiClient({
    serverUrl: p.url,
    token: "t",
    logger: silentLogger,
    signal: abort.signal,
    onJobLost: (err) => {
      lost += 1;
      abort.abort(err);
    },
  });
  const shipper = new LogShipper({ send: (c) => api.log(c), logger: silentLogger, intervalMs: 1, signal: abort.signal });
  shipper.push("stdout", "a");
  await shipper.flush();
  shipper.push("stdout", "b");
  await shipper.flush();
  await api.close();
  await p.close();
  assert.equal(lost, 1);
  assert.equal(p.requests(), 1);
});

void test("push answers false over the high-water mark until the backlog drains", async () => {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((r) => (release = r));
  let sends = 0;
  const shipper = new LogShipper({ send: () => (sends++, gate), logger: silentLogger, intervalMs: 1, highWaterChars: 10 });
  assert.equal(shipper.push("stdout", "12345"), true);
  assert.equal(shipper.push("stdout", "678901"), false);
  let drained = false;
  const waiting = shipper.whenDrained().then(() => (drained = true));
  // The shipper has sent the backlog and waits for the answer: still not drained.
  while (sends === 0) await new Promise((r) => setTimeout(r, 1));
  assert.equal(drained, false);
  release();
  await waiting;
  await shipper.flush();
  assert.equal(shipper.backlog, 0);
});

void test("long text is split without cutting a surrogate pair", () => {
  const pieces = splitText("ab😀cd", 3);
  assert.deepEqual(pieces, ["ab", "😀c", "d"]);
  assert.equal(pieces.join(""), "ab😀cd");
});
