/**
 * Step records from a real socket are served in front of Fastify (journal-front.ts), those of
 * app.inject() through Fastify's route: the same request gets the same answer either way (status,
 * body, content type, X-Request-Id, Connection), the same log lines and the same counters; and what
 * the front does not take (a query string, another media type, a chunked body) is Fastify's. Two
 * jobs of two runs take the same requests, one by each way in, so each answer can be compared.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { injected as injectAnswer, logSink, overSocket as socketAnswer, type Answer, type SentRequest } from "./testing/front-compare.js";
import { ask, countRows, createTestApp, startScriptJob, type TestApp, type TestJob } from "./testing/test-app.js";
import { journalFrontOf } from "./app.js";

let t: TestApp;
let base: string;
const lines: Array<Record<string, unknown>> = [];

before(async () => {
  t = await createTestApp({ logger: pino({ level: "info" }, logSink(lines)) });
  base = await t.app.listen({ host: "127.0.0.1", port: 0 });
});
after(() => t.close());

/** A record's request; the path is the journal route's unless given. */
type Sent = Omit<SentRequest, "path"> & { path?: string };
type Got = Answer;

const overSocket = (sent: Sent): Promise<Got> => socketAnswer(base, { ...sent, path: sent.path ?? "/agent/v1/journal" });
const injected = (sent: Sent): Promise<Got> => injectAnswer(t.app, { ...sent, path: sent.path ?? "/agent/v1/journal" });

const json = { "content-type": "application/json" };
const as = (job: TestJob | string): Record<string, string> => ({
  ...json,
  authorization: `Bearer ${typeof job === "string" ? job : job.token}`,
});
const step = (position: number, name: string, text = "out\n", exit = 0): string =>
  JSON.stringify({
    position,
    kind: "step",
    name,
    ordinal: 0,
    status: "done",
    result: { stdout_b64: Buffer.from(text).toString("base64"), exit },
  });

/** Each sent twice, the socket's with one job and Fastify's with the other; `front`: whether the front takes it from the socket. */
type Case = { what: string; sent: (job: TestJob) => Sent; status: number; front: boolean };
const CASES: Case[] = [
  { what: "a new step (printed output: sealed)", sent: (j) => ({ headers: as(j), body: step(0, "build") }), status: 200, front: true },
  { what: "a new step that printed nothing", sent: (j) => ({ headers: as(j), body: step(1, "quiet", "") }), status: 200, front: true },
  { what: "a retried record (answered as recorded)", sent: (j) => ({ headers: as(j), body: step(0, "build") }), status: 200, front: true },
  { what: "another call at a recorded position", sent: (j) => ({ headers: as(j), body: step(0, "deploy") }), status: 422, front: true },
  { what: "a body that is not a record", sent: (j) => ({ headers: as(j), body: '{"position":"zero"}' }), status: 400, front: true },
  { what: "a NUL in a name", sent: (j) => ({ headers: as(j), body: step(2, "a\u0000b") }), status: 400, front: true },
  { what: "a lone surrogate", sent: (j) => ({ headers: as(j), body: step(2, "\udfffx") }), status: 400, front: true },
  { what: "a __proto__ key", sent: (j) => ({ headers: as(j), body: '{"__proto__":{"x":1},"position":2}' }), status: 400, front: true },
  {
    what: "a number past a double",
    sent: (j) => ({ headers: as(j), body: step(2, "s").replace('"position":2', '"position":1e999') }),
    status: 400,
    front: true,
  },
  { what: "not JSON", sent: (j) => ({ headers: as(j), body: "{position" }), status: 400, front: true },
  { what: "an empty body", sent: (j) => ({ headers: { ...as(j), "content-length": "0" } }), status: 400, front: true },
  { what: "no token", sent: () => ({ headers: json, body: step(2, "s") }), status: 401, front: true },
  { what: "a user's token", sent: () => ({ headers: as(t.tokens.member), body: step(2, "s") }), status: 401, front: true },
  {
    what: "a job token never minted",
    sent: () => ({ headers: as("job_never_minted_0000"), body: step(2, "s") }),
    status: 409,
    front: true,
  },
  {
    what: "a sane request id",
    sent: (j) => ({ headers: { ...as(j), "x-request-id": "req-from-lb-1" }, body: step(2, "s2") }),
    status: 200,
    front: true,
  },
  {
    what: "a query string",
    sent: (j) => ({ path: "/agent/v1/journal?x=1", headers: as(j), body: step(3, "s3") }),
    status: 200,
    front: false,
  },
  {
    what: "a charset in the media type",
    sent: (j) => ({ headers: { ...as(j), "content-type": "application/json; charset=utf-8" }, body: step(4, "s4") }),
    status: 200,
    front: false,
  },
  {
    what: "another media type",
    sent: (j) => ({ headers: { ...as(j), "content-type": "text/plain" }, body: step(5, "s5") }),
    status: 400,
    front: false,
  },
];

/** The answer with what differs by design between the two jobs (each its own run) made equal. */
const comparable = (got: Got, job: TestJob): string => got.text.replaceAll(job.runId, "RUN");

test("a step record gets the same answer, log lines and counters from a socket (the front) as through Fastify", async () => {
  const front = journalFrontOf(t.app)!;
  const [viaFront, viaInject] = [await startScriptJob(t), await startScriptJob(t)];
  for (const job of [viaFront, viaInject]) {
    const claimed = await ask(t, "POST", "/agent/v1/claim", { as: { token: job.token }, body: { agent_id: "agent-1" } });
    assert.equal(claimed.status, 200, claimed.text);
  }
  const journalRows = await countRows(t, "journal");
  for (const c of CASES) {
    const taken = front.taken;
    const before = lines.length;
    const socket = await overSocket(c.sent(viaFront));
    assert.equal(front.taken - taken, c.front ? 1 : 0, `${c.what}: ${c.front ? "served by the front" : "left to Fastify"}`);
    const socketLines = lines.slice(before).map(({ time: _t, pid: _p, hostname: _h, requestId: _r, ...rest }) => rest);
    const mark = lines.length;
    const fastify = await injected(c.sent(viaInject));
    const fastifyLines = lines.slice(mark).map(({ time: _t, pid: _p, hostname: _h, requestId: _r, ...rest }) => rest);
    assert.equal(socket.status, c.status, `${c.what}: ${socket.text}`);
    assert.equal(socket.status, fastify.status, c.what);
    assert.equal(comparable(socket, viaFront), comparable(fastify, viaInject), c.what);
    assert.equal(socket.headers["content-type"], fastify.headers["content-type"], c.what);
    assert.equal(socket.headers.connection === "close", fastify.headers.connection === "close", `${c.what}: connection`);
    assert.match(socket.headers["x-request-id"] ?? "", c.what === "a sane request id" ? /^req-from-lb-1$/ : /^req-[0-9a-z]{26}$/, c.what);
    assert.deepEqual(socketLines, fastifyLines, `${c.what}: the same log lines`);
  }
  // Each job recorded positions 0-4 (1 and 2 printed nothing or were renamed; 5 was refused), no more.
  assert.equal((await countRows(t, "journal")) - journalRows, 2 * 5);
  const sealed = await t.db.pool.query<{ result: unknown }>(`select result from journal where run_id = $1 and position = 0`, [
    viaFront.runId,
  ]);
  assert.ok(!JSON.stringify(sealed.rows[0]?.result).includes(Buffer.from("out\n").toString("base64")), "a printed step is stored sealed");

  // A job that finished: its next record is 409 either way, and nothing is written.
  for (const job of [viaFront, viaInject]) {
    const done = await ask(t, "POST", "/agent/v1/finish", {
      as: { token: job.token },
      body: { exit_code: 0, duration_ms: 1, outputs: {} },
    });
    assert.equal(done.status, 200, done.text);
  }
  const lost = await overSocket({ headers: as(viaFront), body: step(9, "late") });
  const lostInject = await injected({ headers: as(viaInject), body: step(9, "late") });
  assert.equal(lost.status, 409, lost.text);
  assert.equal(lost.text, lostInject.text);
  assert.equal((await countRows(t, "journal")) - journalRows, 2 * 5, "a lost job's record is not written");

  const scrape = (await ask(t, "GET", "/metrics", { as: "none" })).text;
  const count = (series: string): number => Number(new RegExp(`^${series.replace(/[{}"]/g, "\\$&")} (\\d+)`, "m").exec(scrape)?.[1] ?? 0);
  const route = 'method="POST",route="/agent/v1/journal"';
  const of = (status: number): number => CASES.filter((c) => c.status === status).length;
  assert.equal(count(`flowsvc_http_requests_total{${route},status="200"}`), 2 * of(200));
  assert.equal(count(`flowsvc_http_requests_total{${route},status="400"}`), 2 * of(400));
  assert.equal(count(`flowsvc_http_requests_total{${route},status="401"}`), 2 * of(401));
  assert.equal(count(`flowsvc_http_requests_total{${route},status="409"}`), 2 * of(409) + 2);
  assert.equal(count(`flowsvc_http_requests_total{${route},status="422"}`), 2 * of(422));
  assert.equal(count("flowsvc_step_record_duration_seconds_count"), 2 * of(200), "every step recorded is timed");
});
