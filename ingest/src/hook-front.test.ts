/**
 * Hook deliveries from a real socket are served in front of Fastify (hook-front.ts), those of
 * app.inject() through Fastify's route: the same request gets the same answer either way (status,
 * body, content type, X-Request-Id, Connection), the same refusal line in the log and the same
 * counters; and what the front does not take (an oversized or percent-encoded request) is Fastify's.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { injected as injectAnswer, logSink, overSocket as socketAnswer, type Answer, type SentRequest } from "./testing/front-compare.js";
import { ask, createTestApp, type TestApp } from "./testing/test-app.js";
import { hookFrontOf } from "./app.js";

let t: TestApp;
let base: string;
let secret: string;
const lines: Array<Record<string, unknown>> = [];

before(async () => {
  t = await createTestApp({ logger: pino({ level: "info" }, logSink(lines)) });
  const made = await ask(t, "PUT", `${t.project.base}/event-hooks/ci`, { as: "admin", body: { event_type: "ci.done" } });
  assert.equal(made.status, 201, made.text);
  secret = (made.body as { secret: string }).secret;
  base = await t.app.listen({ host: "127.0.0.1", port: 0 });
});
after(() => t.close());

type Sent = SentRequest;
type Got = Answer;

const overSocket = (sent: Sent): Promise<Got> => socketAnswer(base, sent);
const injected = (sent: Sent): Promise<Got> => injectAnswer(t.app, sent);

/** The answer with what differs by design between two deliveries (each records its own event) made equal. */
const comparable = (got: Got): Got => ({ ...got, text: got.text.replace(/"event_id":"[^"]+"/, '"event_id":"evt"') });

const json = { "content-type": "application/json" };
const path = (name = "ci", query = ""): string => `/api/v1/hooks/${t.project.org}/p/${name}${query}`;

/** Each sent twice, over a socket and by app.inject(); `front`: whether the front takes it from the socket. */
const CASES: Array<{ what: string; sent: () => Sent; status: number; front: boolean }> = [
  {
    what: "JSON, secret header",
    sent: () => ({ path: path(), headers: { ...json, "x-flow-hook-secret": secret }, body: '{"a":[1,2]}' }),
    status: 202,
    front: true,
  },
  {
    what: "query secret and values",
    sent: () => ({ path: path("ci", `?secret=${secret}&x=1&x=2`), headers: json, body: "{}" }),
    status: 202,
    front: true,
  },
  {
    what: "plain text",
    sent: () => ({ path: path(), headers: { "content-type": "text/plain; charset=utf-8", "x-flow-hook-secret": secret }, body: "hi" }),
    status: 202,
    front: true,
  },
  {
    what: "no body, no type",
    sent: () => ({ path: path(), headers: { "x-flow-hook-secret": secret, "content-length": "0" } }),
    status: 202,
    front: true,
  },
  {
    what: "wrong secret",
    sent: () => ({ path: path("ci", "?secret=fhs_wrong_never_logged"), headers: json, body: "{}" }),
    status: 401,
    front: true,
  },
  { what: "no secret", sent: () => ({ path: path(), headers: json, body: "{}" }), status: 401, front: true },
  {
    what: "no such hook",
    sent: () => ({ path: path("nope"), headers: { ...json, "x-flow-hook-secret": secret }, body: "{}" }),
    status: 404,
    front: true,
  },
  {
    what: "a NUL in the body",
    sent: () => ({ path: path(), headers: { ...json, "x-flow-hook-secret": secret }, body: '{"a":"\\u0000"}' }),
    status: 400,
    front: true,
  },
  {
    what: "a lone 0xFF: not UTF-8",
    sent: () => ({
      path: path(),
      headers: { "content-type": "text/plain", "x-flow-hook-secret": secret },
      body: Buffer.from([0x68, 0xff]),
    }),
    status: 400,
    front: true,
  },
  {
    what: "a bad byte inside a JSON string",
    sent: () => ({ path: path(), headers: { ...json, "x-flow-hook-secret": secret }, body: Buffer.from('{"a":"\xed\xa0\x80"}', "latin1") }),
    status: 400,
    front: true,
  },
  {
    what: "a UTF-8 BOM, kept",
    sent: () => ({ path: path(), headers: { ...json, "x-flow-hook-secret": secret }, body: Buffer.from("\xef\xbb\xbf{}", "latin1") }),
    status: 202,
    front: true,
  },
  {
    what: "a sane request id",
    sent: () => ({ path: path(), headers: { ...json, "x-flow-hook-secret": secret, "x-request-id": "req-from-lb-1" }, body: "{}" }),
    status: 202,
    front: true,
  },
  {
    what: "a NUL in the query",
    sent: () => ({ path: path("ci", "?a=%00"), headers: { ...json, "x-flow-hook-secret": secret }, body: "{}" }),
    status: 400,
    front: false,
  },
  {
    what: "percent-encoded name",
    sent: () => ({ path: path("%63i"), headers: { ...json, "x-flow-hook-secret": secret }, body: "{}" }),
    status: 202,
    front: false,
  },
  {
    what: "bad media type",
    sent: () => ({ path: path(), headers: { "content-type": "not a type", "x-flow-hook-secret": secret }, body: "{}" }),
    status: 400,
    front: false,
  },
  {
    what: "over the limit",
    sent: () => ({ path: path(), headers: { ...json, "x-flow-hook-secret": secret }, body: "x".repeat(2 * 1024 * 1024 + 1) }),
    status: 413,
    front: false,
  },
];

test("a delivery gets the same answer, log line and counters from a socket (the front) as through Fastify", async () => {
  const cases = CASES;
  const front = hookFrontOf(t.app)!;
  for (const c of cases) {
    const taken = front.taken;
    const before = lines.length;
    const viaSocket = await overSocket(c.sent());
    assert.equal(front.taken - taken, c.front ? 1 : 0, `${c.what}: ${c.front ? "served by the front" : "left to Fastify"}`);
    const socketLines = lines.slice(before).map(({ time: _t, pid: _p, hostname: _h, requestId: _r, ...rest }) => rest);
    const mark = lines.length;
    const viaFastify = await injected(c.sent());
    const fastifyLines = lines.slice(mark).map(({ time: _t, pid: _p, hostname: _h, requestId: _r, ...rest }) => rest);
    assert.equal(viaSocket.status, c.status, `${c.what}: ${viaSocket.text}`);
    assert.deepEqual(comparable(viaSocket).text, comparable(viaFastify).text, c.what);
    assert.equal(viaSocket.status, viaFastify.status, c.what);
    assert.equal(viaSocket.headers["content-type"], viaFastify.headers["content-type"], c.what);
    assert.equal(viaSocket.headers.connection === "close", viaFastify.headers.connection === "close", `${c.what}: connection`);
    assert.match(
      viaSocket.headers["x-request-id"] ?? "",
      c.what === "a sane request id" ? /^req-from-lb-1$/ : /^req-[0-9a-z]{26}$/,
      c.what,
    );
    assert.deepEqual(socketLines, fastifyLines, `${c.what}: the same log lines`);
  }
  const refused = lines.filter((l) => l["msg"] === "hook delivery refused");
  assert.ok(refused.some((l) => String(l["url"]).includes("secret=[redacted]") && typeof l["requestId"] === "string"));
  assert.ok(!JSON.stringify(lines).includes("fhs_wrong_never_logged"), "the query's secret never reaches the log");
  const scrape = (await ask(t, "GET", "/metrics", { as: "none" })).text;
  const count = (series: string): number => Number(new RegExp(`^${series.replace(/[{}"]/g, "\\$&")} (\\d+)`, "m").exec(scrape)?.[1] ?? 0);
  // Each case twice (socket, then Fastify): every counter is even, and counts what the cases say.
  const route = 'method="POST",route="/api/v1/hooks/:org/:project/:name"';
  assert.equal(count(`flowsvc_hook_deliveries_total{outcome="recorded"}`), 2 * cases.filter((c) => c.status === 202).length);
  assert.equal(count(`flowsvc_hook_refusals_total{reason="wrong_secret"}`), 2);
  assert.equal(count(`flowsvc_hook_refusals_total{reason="no_secret"}`), 2);
  assert.equal(count(`flowsvc_hook_refusals_total{reason="not_found"}`), 2);
  assert.equal(
    count(`flowsvc_hook_refusals_total{reason="invalid_argument"}`),
    2 * 5,
    "NUL in the body, two bodies not UTF-8, NUL in the query, the media type",
  );
  assert.equal(count(`flowsvc_hook_refusals_total{reason="payload_too_large"}`), 2);
  assert.equal(count(`flowsvc_http_requests_total{${route},status="202"}`), 2 * cases.filter((c) => c.status === 202).length);
  assert.equal(count(`flowsvc_http_requests_total{${route},status="401"}`), 4);
});
