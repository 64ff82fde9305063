import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { FlowError } from "@flowsvc/core";
import { AgentApiClient, newAgentApiDispatcher } from "./agent-api-client.js";
import { silentLogger } from "./logger.js";

type Route = (body: unknown, res: ServerResponse) => void;

/** An agent API on 127.0.0.1 answering per route; records each request as `route body`. */
const fakeServer = async (routes: Record<string, Route>) => {
  const seen: string[] = [];
  /** Each request's X-Request-Id (`-` when none was sent), as `route id`. */
  const requestIds: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let text = "";
    req
      .setEncoding("utf8")
      .on("data", (d: string) => (text += d))
      .on("end", () => {
        const route = (req.url ?? "").replace("/agent/v1/", "");
        seen.push(`${route} ${text}`);
        requestIds.push(`${route} ${String(req.headers["x-request-id"] ?? "-")}`);
        const handle = routes[route];
        if (!handle) return send(res, 404, { error: { code: "not_found", message: route } });
        handle(JSON.parse(text || "{}"), res);
      });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = new AgentApiClient({ serverUrl: url, token: "tok", logger: silentLogger, minDelayMs: 1, maxDelayMs: 5 });
  return {
    client,
    seen,
    requestIds,
    close: async () => {
      await client.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
};

const send = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
};

void test("call retries a server that answers 503 until it answers the call", async () => {
  let failures = 0;
  const s = await fakeServer({
    call: (body, res) => {
      if (failures++ < 3) return send(res, 503, { error: { code: "unavailable", message: "starting" } });
      const b = body as { position: number; kind: string; name: string; ordinal: number };
      send(res, 200, {
        status: "pending",
        entry: { ...b, status: "pending", result: null },
        substate: { name: "go", kind: "signal" },
        deadline: null,
      });
    },
  });
  const answer = await s.client.call({ position: 3, kind: "wait-signal", name: "go", ordinal: 0, args: {} });
  assert.equal(answer.status, "pending");
  assert.equal(s.seen.length, 4);
  await s.close();
});

void test("an activity claim is read as one, and its end goes to finish-activity", async () => {
  const s = await fakeServer({
    claim: (_body, res) =>
      send(res, 200, {
        kind: "activity",
        job_id: "job-1",
        run_id: "run-1",
        activity_id: "act-1",
        name: "build",
        project: "prj-1",
        attempt: 1,
        argv: ["make"],
        env: {},
        masks: [],
        lease_ms: 5000,
      }),
    "finish-activity": (_body, res) => send(res, 200, { status: "succeeded" }),
  });
  const claim = await s.client.claim({ agent_id: "agt-1", capabilities: [] });
  assert.equal(claim.kind, "activity");
  assert.equal(await s.client.finishActivity({ exit_code: 0, stdout_b64: "", duration_ms: 5 }), "succeeded");
  assert.deepEqual(s.seen.at(-1), 'finish-activity {"exit_code":0,"stdout_b64":"","duration_ms":5}');
  await s.close();
});

const activityClaim = (requestId: unknown) => ({
  kind: "activity",
  job_id: "job-1",
  run_id: "run-1",
  activity_id: "act-1",
  name: "build",
  project: "prj-1",
  attempt: 1,
  argv: ["make"],
  env: {},
  masks: [],
  lease_ms: 5000,
  request_id: requestId,
});

void test("the job's calls after its claim carry the claim's request id; an insane one is not sent", async () => {
  for (const [answered, sent] of [
    ["req-06h1h863xndw59n6t11an6w9vc", "req-06h1h863xndw59n6t11an6w9vc"],
    ["bad id\r\nX-Evil: 1", "-"],
  ]) {
    const s = await fakeServer({
      claim: (_body, res) => send(res, 200, activityClaim(answered)),
      heartbeat: (_body, res) => send(res, 200, { lease_ms: 5000 }),
      "finish-activity": (_body, res) => send(res, 200, { status: "succeeded" }),
    });
    await s.client.claim({ agent_id: "agt-1", capabilities: [] });
    await s.client.heartbeat();
    await s.client.finishActivity({ exit_code: 0, stdout_b64: "", duration_ms: 5 });
    assert.deepEqual(s.requestIds, ["claim -", `heartbeat ${sent}`, `finish-activity ${sent}`]);
    await s.close();
  }
});

void test("a lost lease ends every other call's retries with job_lost; close is idempotent", async () => {
  const s = await fakeServer({
    log: (_body, res) => send(res, 503, { error: { code: "unavailable", message: "down" } }),
    heartbeat: (_body, res) => send(res, 409, { error: { code: "job_lost", message: "gone" } }),
    state: (_body, res) => send(res, 200, { found: true, value: { a: 1 } }),
  });
  assert.deepEqual(await s.client.state({ op: "get", key: "k" }), { found: true, value: { a: 1 } });
  const shipping = s.client.log([{ stream: "stdout", data: "x" }]);
  await new Promise((resolve) => setTimeout(resolve, 30));
  await assert.rejects(s.client.heartbeat(), (err: unknown) => err instanceof FlowError && err.code === "job_lost");
  await assert.rejects(shipping, (err: unknown) => err instanceof FlowError && err.code === "job_lost");
  await Promise.all([s.client.close(), s.client.close()]);
  await s.close();
});

void test("jobs that share a worker's pool: one kept-alive connection, each its own token, closing one ends only its own calls", async () => {
  const sockets = new Set<unknown>();
  const tokens: string[] = [];
  let releaseHeld: (() => void) | undefined;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    sockets.add(req.socket);
    tokens.push(`${req.url ?? ""} ${String(req.headers.authorization)}`);
    req.resume().on("end", () => {
      if (req.url === "/agent/v1/log") {
        // Held until the test ends: the call of the job whose client closes meanwhile.
        releaseHeld = () => send(res, 200, {});
        return;
      }
      send(res, 200, { lease_ms: 1000 });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const serverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const dispatcher = newAgentApiDispatcher();
  const a = new AgentApiClient({ serverUrl, token: "tok-a", logger: silentLogger, dispatcher, minDelayMs: 1, maxDelayMs: 5 });
  const b = new AgentApiClient({ serverUrl, token: "tok-b", logger: silentLogger, dispatcher, minDelayMs: 1, maxDelayMs: 5 });
  try {
    for (let i = 0; i < 4; i++) assert.equal(await b.heartbeat(), 1000);
    // undici replaces its very first connection once; after that, calls reuse the kept-alive one.
    assert.ok(sockets.size <= 2, `calls one after another reuse the pool's connection (${sockets.size} connections for 4 calls)`);
    const held = a.log([{ stream: "stdout", data: "hi\n" }]);
    await waitUntil(() => releaseHeld !== undefined);
    await a.close();
    await assert.rejects(held, /closed/);
    assert.equal(await b.heartbeat(), 1000, "the other job's client still works on the shared pool");
    assert.deepEqual(tokens, [
      ...Array.from({ length: 4 }, () => "/agent/v1/heartbeat Bearer tok-b"),
      "/agent/v1/log Bearer tok-a",
      "/agent/v1/heartbeat Bearer tok-b",
    ]);
  } finally {
    releaseHeld?.();
    await b.close();
    await dispatcher.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** Polls `ready` on the event loop's next turns (no fixed sleep: it returns as soon as it holds). */
const waitUntil = async (ready: () => boolean): Promise<void> => {
  while (!ready()) await new Promise((resolve) => setImmediate(resolve));
};
