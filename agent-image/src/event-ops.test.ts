import { test } from "node:test";
import assert from "node:assert/strict";
import type { CallRequest } from "@flowsvc/core";
import { agentSocket, b64, doneCall, entry, fakeBackend, pendingCall } from "./agent-test-kit.js";
import type { Answer } from "./agent-test-kit.js";

const answering = (result: (body: CallRequest) => unknown) =>
  fakeBackend({ call: (body) => Promise.resolve(doneCall(body, result(body))) });

const callBodies = (backend: ReturnType<typeof fakeBackend>): unknown[] => backend.calls.filter(([m]) => m === "call").map(([, b]) => b);

const refusal = (a: Answer | undefined): [unknown, unknown, string] => [
  a?.["ok"],
  a?.["exit"],
  (a?.["error"] as { message: string } | undefined)?.message ?? "",
];

void test("emit is a positional durable call: type, key and payload (null by default); it prints the event id and answers event_id", async () => {
  let n = 0;
  const backend = answering(() => ({ event_id: `evt-${++n}` }));
  const a = await agentSocket([], backend);
  const answers = await a.call(
    { v: 2, op: "emit", type: "deploy.done" },
    { v: 2, op: "emit", type: "deploy.done", key: "acme/web", payload: { v: 2, list: [1, "x"] } },
    { v: 2, op: "emit", type: "t", key: null, payload: null },
  );
  assert.deepEqual(
    answers,
    [1, 2, 3].map((i) => ({ v: 2, ok: true, replay: false, capture_ino: 4242, stdout_b64: b64(`evt-${i}\n`), event_id: `evt-${i}` })),
  );
  assert.deepEqual(callBodies(backend), [
    { position: 0, kind: "emit", name: "", ordinal: 0, args: { type: "deploy.done", key: null, payload: null } },
    { position: 1, kind: "emit", name: "", ordinal: 1, args: { type: "deploy.done", key: "acme/web", payload: { v: 2, list: [1, "x"] } } },
    { position: 2, kind: "emit", name: "", ordinal: 2, args: { type: "t", key: null, payload: null } },
  ]);
  await a.close();
});

void test("a replayed emit answers the recorded id without the backend, whatever the payload is now", async () => {
  const backend = fakeBackend();
  const a = await agentSocket([entry([0, "emit", "", 0], { event_id: "evt-first" })], backend);
  const [r] = await a.call({ v: 2, op: "emit", type: "deploy.done", payload: { attempt: 2 } });
  assert.deepEqual(r, { v: 2, ok: true, replay: true, capture_ino: 4242, stdout_b64: b64("evt-first\n"), event_id: "evt-first" });
  assert.deepEqual(callBodies(backend), []);
  await a.close();
});

void test("emit refuses a malformed or reserved type and a bad key with exit 2, before any call", async () => {
  const backend = answering(() => ({ event_id: "evt-1" }));
  const a = await agentSocket([], backend);
  const answers = await a.call(
    { v: 2, op: "emit", type: "" },
    { v: 2, op: "emit", type: "a b" },
    { v: 2, op: "emit", type: "x".repeat(65) },
    { v: 2, op: "emit", type: "run.failed" },
    { v: 2, op: "emit", type: "Manual" },
    { v: 2, op: "emit", type: "ok", key: "" },
    { v: 2, op: "emit", type: "ok", key: "k".repeat(513) },
  );
  const got = answers.map(refusal);
  for (const [ok, exit] of got) assert.deepEqual([ok, exit], [false, 2]);
  assert.match(got[1]?.[2] ?? "", /event type "a b" must be 1-64 characters from \[A-Za-z0-9._-\]/);
  assert.match(got[3]?.[2] ?? "", /"run.failed" is reserved for the platform/);
  assert.match(got[5]?.[2] ?? "", /key: a subject must be 1-512 characters, got 0/);
  assert.deepEqual(callBodies(backend), []);
  await a.close();
});

void test("an emit over 2 MiB is refused with how far over, exit 1, and takes no position", async () => {
  const backend = answering(() => ({ event_id: "evt-1" }));
  const a = await agentSocket([], backend);
  const [big, fine] = await a.call(
    { v: 2, op: "emit", type: "big", payload: "x".repeat(2 * 1024 * 1024) },
    { v: 2, op: "emit", type: "ok" },
  );
  assert.deepEqual(refusal(big).slice(0, 2), [false, 1]);
  assert.match(refusal(big)[2], /^the event is \d+ bytes, \d+ bytes over the 2 MiB emit limit$/);
  assert.equal(fine?.["event_id"], "evt-1");
  assert.deepEqual(callBodies(backend), [
    { position: 0, kind: "emit", name: "", ordinal: 0, args: { type: "ok", key: null, payload: null } },
  ]);
  await a.close();
});

void test("a new wait-event is named by its type; a pending one is not answered and the job suspends", async () => {
  const backend = fakeBackend({ call: (body) => Promise.resolve(pendingCall(body, { name: "event:deploy.done#0", kind: "wait-event" })) });
  const a = await agentSocket([], backend);
  assert.equal(await a.callSilent({ v: 2, op: "wait-event", type: "deploy.done", timeout: "20s" }), undefined);
  assert.deepEqual(callBodies(backend), [
    { position: 0, kind: "wait-event", name: "deploy.done", ordinal: 0, args: { timeout_ms: 20_000 } },
  ]);
  assert.deepEqual(a.suspended, [
    {
      position: 0,
      kind: "wait-event",
      name: "deploy.done",
      substate: { name: "event:deploy.done#0", kind: "wait-event" },
      deadline: null,
    },
  ]);
  await a.close();
});

void test("wait-event prints the whole envelope as one line of JSON; a timed-out one exits 124; both replay the same", async () => {
  const envelope = { type: "deploy.done", event: "evt-1", key: "acme/web", payload: { v: 2 } };
  const results: unknown[] = [{ envelope }, { timed_out: true }];
  const a = await agentSocket(
    [],
    answering(() => results.shift()),
  );
  const [got, timedOut] = await a.call(
    { v: 2, op: "wait-event", type: "deploy.done" },
    { v: 2, op: "wait-event", type: "deploy.done", timeout: "1s" },
  );
  assert.deepEqual(got, { v: 2, ok: true, replay: false, capture_ino: 4242, stdout_b64: b64(`${JSON.stringify(envelope)}\n`) });
  assert.deepEqual(timedOut, { v: 2, ok: true, exit: 124, stderr: "flow: wait-event deploy.done timed out\n" });
  await a.close();

  const replay = await agentSocket([
    entry([0, "wait-event", "deploy.done", 0], { envelope }),
    entry([1, "wait-event", "deploy.done", 1], { timed_out: true }),
  ]);
  const again = await replay.call(
    { v: 2, op: "wait-event", type: "deploy.done" },
    { v: 2, op: "wait-event", type: "deploy.done", timeout: "1s" },
  );
  assert.deepEqual(again, [
    { v: 2, ok: true, replay: true, capture_ino: 4242, stdout_b64: b64(`${JSON.stringify(envelope)}\n`) },
    { v: 2, ok: true, exit: 124, stderr: "flow: wait-event deploy.done timed out\n" },
  ]);
  await replay.close();
});

void test("wait-event refuses a malformed type and a bad timeout with exit 2; a different type at the position is a determinism error", async () => {
  const backend = answering(() => ({ timed_out: true }));
  const a = await agentSocket([entry([0, "wait-event", "deploy.done", 0], { timed_out: true })], backend);
  const [badType, badTimeout, other] = await a.call(
    { v: 2, op: "wait-event", type: "event:x" },
    { v: 2, op: "wait-event", type: "x", timeout: "soon" },
    { v: 2, op: "wait-event", type: "deploy.started" },
  );
  assert.deepEqual(refusal(badType).slice(0, 2), [false, 2]);
  assert.deepEqual(refusal(badTimeout).slice(0, 2), [false, 2]);
  assert.equal((other?.["error"] as { code: string }).code, "determinism");
  assert.deepEqual(callBodies(backend), []);
  await a.close();
});

void test("an emit payload the bus cannot store as sent (1e400, nesting over 128) is refused with its place, exit 2, and takes no position", async () => {
  const backend = answering(() => ({ event_id: "evt-1" }));
  const a = await agentSocket([], backend);
  const deep = "[".repeat(200) + "]".repeat(200);
  const answers = await a.call(
    '{"v":2,"op":"emit","type":"n","payload":1e400}',
    '{"v":2,"op":"emit","type":"n","payload":{"a":[0,-1e400]}}',
    `{"v":2,"op":"emit","type":"deep","payload":${deep}}`,
    { v: 2, op: "emit", type: "ok", payload: 1.7e308 },
  );
  const got = answers.slice(0, 3).map(refusal);
  for (const [ok, exit] of got) assert.deepEqual([ok, exit], [false, 2]);
  assert.match(got[0]?.[2] ?? "", /^payload is a number outside the range a JSON number can be stored in .*; nothing was recorded$/);
  assert.match(got[1]?.[2] ?? "", /^payload\.a\[1\] is a number outside the range/);
  assert.match(got[2]?.[2] ?? "", /^payload[[\]0]+\.\.\. is nested more than 128 levels deep/);
  assert.equal(answers[3]?.["event_id"], "evt-1");
  assert.deepEqual(callBodies(backend), [
    { position: 0, kind: "emit", name: "", ordinal: 0, args: { type: "ok", key: null, payload: 1.7e308 } },
  ]);
  await a.close();
});
