/**
 * Request ids (core/src/request-id.ts) over app.inject() and a raw socket: every answer carries
 * X-Request-Id, a sane one sent is kept and anything else replaced (never cut or echoed), the
 * claim answers the claiming request's id, and the job's later calls sent with it are logged under
 * it: one grep of the id follows the job.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { Writable } from "node:stream";
import { pino } from "pino";
import { ask, createTestApp, startScriptJob, type TestApp } from "./testing/test-app.js";

const lines: Array<Record<string, unknown>> = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const line of chunk.toString("utf8").split("\n")) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
    done();
  },
});

let t: TestApp;
let port: number;
before(async () => {
  t = await createTestApp({ logger: pino({ level: "info" }, sink) });
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  port = (t.app.server.address() as { port: number }).port;
});
after(() => t.close());

const MINTED = /^req-[0-9a-z]{26}$/;
const idOf = (res: { res: { headers: Record<string, unknown> } }): string => String(res.res.headers["x-request-id"]);

test("every answer carries a fresh request id, and a sane one sent is kept", async () => {
  const a = await ask(t, "GET", "/api/v1/whoami");
  const b = await ask(t, "GET", "/no/such/route");
  assert.match(idOf(a), MINTED);
  assert.match(idOf(b), MINTED, "a 404 carries one too");
  assert.notEqual(idOf(a), idOf(b));
  const kept = await ask(t, "GET", "/api/v1/whoami", { headers: { "x-request-id": "ci-build_42.7" } });
  assert.equal(idOf(kept), "ci-build_42.7");
});

test("a hostile X-Request-Id is replaced, never cut, escaped or echoed", async () => {
  const hostile = [
    "a".repeat(10 * 1024),
    "a".repeat(129),
    "",
    "has space",
    "a,b",
    "../../etc/passwd",
    "abc%0d%0aSet-Cookie:%20x=1",
    "ünï",
    "\u{1F600}",
  ];
  for (const value of hostile) {
    const res = await ask(t, "GET", "/api/v1/whoami", { headers: { "x-request-id": value } });
    assert.equal(res.status, 200, `${JSON.stringify(value.slice(0, 40))}: ${res.text}`);
    assert.match(idOf(res), MINTED, `${JSON.stringify(value.slice(0, 40))} was replaced`);
  }
});

/** A raw HTTP/1.1 request on the listening app; the whole answer as text. */
const raw = (request: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    socket.on("data", (d: Buffer) => (text += d.toString("latin1")));
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
    socket.end(Buffer.from(request, "latin1"));
  });

test("NUL and CR/LF in X-Request-Id: refused by the HTTP parser or replaced, and nothing injected into the answer", async () => {
  const ask1 = (value: string) => raw(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${value}\r\nConnection: close\r\n\r\n`);
  for (const value of ["a\u0000b", "abc\rSet-Cookie: evil=1", "abc\nSet-Cookie: evil=1"]) {
    const answer = await ask1(value);
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
    assert.ok(status === 400 || status === 200, `${JSON.stringify(value)}: ${answer.slice(0, 200)}`);
    assert.ok(!/set-cookie|evil/i.test(answer), `${JSON.stringify(value)}: nothing injected: ${answer}`);
    const id = /x-request-id: ([^\r\n]*)/i.exec(answer)?.[1];
    if (id !== undefined) assert.match(id, MINTED);
  }
  // A header that ends the line and starts another is two headers: the id is what precedes it.
  const split = await ask1("abc\r\nSet-Cookie: evil=1");
  assert.match(split, /x-request-id: abc\r\n/i);
  assert.ok(!/set-cookie/i.test(split), split);
});

test("the claim answers its request's id, and the job's calls sent with it are logged under it", async () => {
  const job = await startScriptJob(t, "echo hi\n");
  const claim = await ask(t, "POST", "/agent/v1/claim", { as: { token: job.token }, body: { agent_id: "agent-1" } });
  assert.equal(claim.status, 200, claim.text);
  const requestId = (claim.body as { request_id: string }).request_id;
  assert.equal(requestId, idOf(claim));
  const heartbeat = await ask(t, "POST", "/agent/v1/heartbeat", {
    as: { token: job.token },
    body: {},
    headers: { "x-request-id": requestId },
  });
  assert.equal(idOf(heartbeat), requestId);
  const finish = await ask(t, "POST", "/agent/v1/finish", {
    as: { token: job.token },
    body: { exit_code: 0, duration_ms: 5 },
    headers: { "x-request-id": requestId },
  });
  assert.equal(finish.status, 200, finish.text);
  const mine = lines.filter((l) => l["requestId"] === requestId).map((l) => l["msg"]);
  assert.deepEqual(mine, ["job claimed", "job finished"], "the claim's and the finish's lines, under one id");
});
