import { test } from "node:test";
import assert from "node:assert/strict";
import type { CallRequest } from "@flowsvc/core";
import { agentSocket, b64, doneCall, entry, fakeBackend, pendingCall } from "./agent-test-kit.js";

/** A backend whose /call answers `done` with `result(body)`. */
const answering = (result: (body: CallRequest) => unknown) =>
  fakeBackend({ call: (body) => Promise.resolve(doneCall(body, result(body))) });

const callBodies = (backend: ReturnType<typeof fakeBackend>): unknown[] => backend.calls.filter(([m]) => m === "call").map(([, b]) => b);

void test("a new sleep is sent to the backend with its duration in milliseconds and answered once it is done", async () => {
  const backend = answering(() => ({}));
  const a = await agentSocket([], backend);
  const [r] = await a.call({ v: 2, op: "sleep", duration: "1m30s" });
  assert.deepEqual(r, { v: 2, ok: true });
  assert.deepEqual(callBodies(backend), [{ position: 0, kind: "sleep", name: "", ordinal: 0, args: { duration_ms: 90_000 } }]);
  await a.close();
});

void test("a bad duration is refused with exit 2 and the parse error, and takes no position", async () => {
  const backend = answering(() => ({}));
  const a = await agentSocket([], backend);
  const [bad, good] = await a.call({ v: 2, op: "sleep", duration: "5 parsecs" }, { v: 2, op: "sleep", duration: "0s" });
  assert.equal(bad?.["ok"], false);
  assert.equal(bad?.["exit"], 2);
  assert.match((bad?.["error"] as { message: string }).message, /invalid duration "5 parsecs": unknown unit "parsecs"/);
  assert.deepEqual(good, { v: 2, ok: true });
  assert.deepEqual(callBodies(backend), [{ position: 0, kind: "sleep", name: "", ordinal: 0, args: { duration_ms: 0 } }]);
  await a.close();
});

void test("a call the journal recorded as done is answered from the journal without the backend", async () => {
  const a = await agentSocket([
    entry([0, "sleep", "", 0], {}),
    entry([1, "wait-signal", "go", 0], { payload: { n: 1 } }),
    entry([2, "lock", "deploy", 0], { granted_at: "2025-01-01T00:00:00Z" }),
    entry([3, "unlock", "deploy", 0], {}),
    entry([4, "spawn", "", 0], { run_id: "run-child" }),
  ]);
  const answers = await a.call(
    { v: 2, op: "sleep", duration: "1h" },
    { v: 2, op: "wait-signal", name: "go" },
    { v: 2, op: "lock", group: "deploy" },
    { v: 2, op: "unlock", group: "deploy" },
    { v: 2, op: "spawn", source_b64: b64("echo hi\n"), filename: "child.sh" },
  );
  assert.deepEqual(answers, [
    { v: 2, ok: true },
    { v: 2, ok: true, replay: true, capture_ino: 4242, stdout_b64: b64('{"n":1}\n') },
    { v: 2, ok: true },
    { v: 2, ok: true },
    { v: 2, ok: true, replay: true, capture_ino: 4242, stdout_b64: b64("run-child\n") },
  ]);
  await a.close();
});

void test("a call that was pending in the claim's snapshot is asked of the backend again", async () => {
  const backend = answering(() => ({ payload: "late" }));
  const a = await agentSocket([entry([0, "wait-signal", "go", 0], null, "pending")], backend);
  const [r] = await a.call({ v: 2, op: "wait-signal", name: "go" });
  assert.deepEqual(r, { v: 2, ok: true, replay: false, capture_ino: 4242, stdout_b64: b64('"late"\n') });
  assert.deepEqual(callBodies(backend), [{ position: 0, kind: "wait-signal", name: "go", ordinal: 0, args: {} }]);
  await a.close();
});

void test("a pending call is not answered: the job suspends, and later requests go unanswered too", async () => {
  const backend = fakeBackend({ call: (body) => Promise.resolve(pendingCall(body, { name: "go", kind: "signal" })) });
  const a = await agentSocket([], backend);
  assert.equal(await a.callSilent({ v: 2, op: "wait-signal", name: "go", timeout: "10s" }), undefined);
  assert.deepEqual(a.suspended, [
    { position: 0, kind: "wait-signal", name: "go", substate: { name: "go", kind: "signal" }, deadline: null },
  ]);
  assert.deepEqual(callBodies(backend), [{ position: 0, kind: "wait-signal", name: "go", ordinal: 0, args: { timeout_ms: 10_000 } }]);
  assert.equal(await a.callSilent({ v: 2, op: "hello" }), undefined);
  assert.deepEqual(a.events, ["suspended at #0"]);
  await a.close();
});

void test("wait-signal prints the payload as one line of JSON; null without a payload", async () => {
  const payloads: unknown[] = [{ a: [1, "x"] }, undefined];
  const a = await agentSocket(
    [],
    answering(() => (payloads.length > 1 ? { payload: payloads.shift() } : {})),
  );
  const [first, second] = await a.call({ v: 2, op: "wait-signal", name: "go" }, { v: 2, op: "wait-signal", name: "go" });
  assert.equal(Buffer.from(first?.["stdout_b64"] as string, "base64").toString(), '{"a":[1,"x"]}\n');
  assert.equal(Buffer.from(second?.["stdout_b64"] as string, "base64").toString(), "null\n");
  await a.close();
});

void test("a timed-out wait exits 124 with a message, and the recorded timeout replays the same", async () => {
  const a = await agentSocket(
    [],
    answering(() => ({ timed_out: true })),
  );
  const [r] = await a.call({ v: 2, op: "wait-signal", name: "approval", timeout: "1s" });
  assert.deepEqual(r, { v: 2, ok: true, exit: 124, stderr: "flow: wait-signal approval timed out\n" });
  await a.close();
  const replay = await agentSocket([entry([0, "wait-signal", "approval", 0], { timed_out: true })]);
  const [again] = await replay.call({ v: 2, op: "wait-signal", name: "approval", timeout: "1s" });
  assert.deepEqual(again, r);
  await replay.close();
});

void test("wait-signal refuses names starting event: and bad timeouts with exit 2, before any call", async () => {
  const a = await agentSocket([]);
  const [reserved, badTimeout] = await a.call(
    { v: 2, op: "wait-signal", name: "event:push" },
    { v: 2, op: "wait-signal", name: "go", timeout: "-1s" },
  );
  assert.deepEqual([reserved?.["ok"], reserved?.["exit"]], [false, 2]);
  assert.match((reserved?.["error"] as { message: string }).message, /"event:" are reserved/);
  assert.deepEqual([badTimeout?.["ok"], badTimeout?.["exit"]], [false, 2]);
  assert.match((badTimeout?.["error"] as { message: string }).message, /cannot be negative/);
  await a.close();
});

void test("lock and unlock are named by their group; a different call at the position is a determinism error", async () => {
  const backend = answering(() => ({}));
  const a = await agentSocket([entry([0, "lock", "db", 0], {})], backend);
  const [lock] = await a.call({ v: 2, op: "lock", group: "deploy" });
  assert.deepEqual([lock?.["ok"], (lock?.["error"] as { code: string }).code], [false, "determinism"]);
  assert.match((lock?.["error"] as { message: string }).message, /recorded lock "db"#0 but the script called lock "deploy"#0/);
  await a.event("failed: determinism error at call #0");
  await a.close();
  const fresh = answering(() => ({}));
  const b = await agentSocket([], fresh);
  await b.call({ v: 2, op: "lock", group: "deploy" }, { v: 2, op: "step", name: "lock:deploy" }, { v: 2, op: "unlock", group: "deploy" });
  assert.deepEqual(callBodies(fresh), [
    { position: 0, kind: "lock", name: "deploy", ordinal: 0, args: {} },
    { position: 2, kind: "unlock", name: "deploy", ordinal: 0, args: {} },
  ]);
  await b.close();
});

void test("the server answering a different call at the position is a determinism error too", async () => {
  const backend = fakeBackend({ call: (body) => Promise.resolve(doneCall({ ...body, kind: "sleep", name: "" }, {})) });
  const a = await agentSocket([], backend);
  const [r] = await a.call({ v: 2, op: "wait-signal", name: "go" });
  assert.equal((r?.["error"] as { code: string }).code, "determinism");
  await a.close();
});

void test("activity answers the child's stdout and exit code; collect the same; submit answers nothing", async () => {
  const backend = answering((body) =>
    body.kind === "activity-submit"
      ? { activity_id: "act-1" }
      : { stdout_b64: b64(`${body.name} out\n`), exit: body.kind === "activity" ? 0 : 3 },
  );
  const a = await agentSocket([], backend);
  const [sync, submit, collect] = await a.call(
    { v: 2, op: "activity", name: "build", argv: ["make", "all"], requires: ["polyglot"] },
    { v: 2, op: "activity-submit", name: "lint", argv: ["npm", "run", "lint"] },
    { v: 2, op: "activity-collect", name: "lint" },
  );
  assert.deepEqual(sync, { v: 2, ok: true, replay: false, capture_ino: 4242, stdout_b64: b64("build out\n"), exit: 0 });
  assert.deepEqual(submit, { v: 2, ok: true });
  assert.deepEqual(collect, { v: 2, ok: true, replay: false, capture_ino: 4242, stdout_b64: b64("lint out\n"), exit: 3 });
  assert.deepEqual(callBodies(backend), [
    { position: 0, kind: "activity", name: "build", ordinal: 0, args: { argv: ["make", "all"], requires: ["polyglot"] } },
    { position: 1, kind: "activity-submit", name: "lint", ordinal: 0, args: { argv: ["npm", "run", "lint"], requires: [] } },
    { position: 2, kind: "activity-collect", name: "lint", ordinal: 0, args: {} },
  ]);
  await a.close();
});

void test("activity-wait-all prints the count of failed uncollected children and exits 0, also on replay", async () => {
  const journal = [entry([0, "activity-wait-all", "", 0], { failed: 2 }), entry([1, "activity-wait-all", "", 1], null, "pending")];
  const a = await agentSocket(
    journal,
    answering(() => ({ failed: 0 })),
  );
  const [replayed, fresh] = await a.call({ v: 2, op: "activity-wait-all" }, { v: 2, op: "activity-wait-all" });
  assert.deepEqual(replayed, { v: 2, ok: true, replay: true, capture_ino: 4242, stdout_b64: b64("2\n"), exit: 0 });
  assert.deepEqual(fresh, { v: 2, ok: true, replay: false, capture_ino: 4242, stdout_b64: b64("0\n"), exit: 0 });
  await a.close();
});

void test("spawn sends the decoded source and prints the child's run id", async () => {
  const backend = answering(() => ({ run_id: "run-01jchild" }));
  const a = await agentSocket([], backend);
  const [r] = await a.call({ v: 2, op: "spawn", source_b64: b64("echo child\n"), filename: "child.sh", as: "script", tags: ["nightly"] });
  assert.deepEqual(r, { v: 2, ok: true, replay: false, capture_ino: 4242, stdout_b64: b64("run-01jchild\n") });
  assert.deepEqual(callBodies(backend), [
    {
      position: 0,
      kind: "spawn",
      name: "",
      ordinal: 0,
      args: { source: "echo child\n", filename: "child.sh", as: "script", tags: ["nightly"] },
    },
  ]);
  await a.close();
});

void test("state is forwarded to the backend on every pass and takes no position", async () => {
  const store = new Map<string, unknown>();
  const backend = fakeBackend({
    state: (body) => {
      if (body.op === "set") store.set(body.key, body.value);
      if (body.op === "delete") store.delete(body.key);
      if (body.op === "get") return Promise.resolve(store.has(body.key) ? { value: store.get(body.key), found: true } : { found: false });
      if (body.op === "list") return Promise.resolve({ items: [...store].map(([key, value]) => ({ key, value })) });
      return Promise.resolve({});
    },
    call: (body) => Promise.resolve(doneCall(body, {})),
  });
  const a = await agentSocket([], backend);
  const answers = await a.call(
    { v: 2, op: "state", action: "set", key: "name", value: "plain text" },
    { v: 2, op: "state", action: "set", key: "conf", value: '{"a":1}', entity: "team" },
    { v: 2, op: "state", action: "get", key: "name" },
    { v: 2, op: "state", action: "get", key: "conf" },
    { v: 2, op: "state", action: "get", key: "missing" },
    { v: 2, op: "state", action: "list" },
    { v: 2, op: "state", action: "delete", key: "name" },
    { v: 2, op: "sleep", duration: "0s" },
  );
  const printed = answers.map((r) => (typeof r["stdout_b64"] === "string" ? Buffer.from(r["stdout_b64"], "base64").toString() : undefined));
  assert.deepEqual(printed, [
    undefined,
    undefined,
    "plain text\n",
    '{"a":1}\n',
    undefined,
    'name\tplain text\nconf\t{"a":1}\n',
    undefined,
    undefined,
  ]);
  assert.ok(answers.every((r) => r["ok"] === true && r["exit"] === undefined));
  const stateBodies = backend.calls.filter(([m]) => m === "state").map(([, b]) => b);
  assert.deepEqual(stateBodies.slice(0, 2), [
    { op: "set", key: "name", value: "plain text" },
    { op: "set", key: "conf", entity: "team", value: { a: 1 } },
  ]);
  assert.deepEqual(callBodies(backend), [{ position: 0, kind: "sleep", name: "", ordinal: 0, args: { duration_ms: 0 } }]);
  await a.close();
});

void test("state set without a value and get without a key are refused", async () => {
  const a = await agentSocket([]);
  const [set, get] = await a.call({ v: 2, op: "state", action: "set", key: "k" }, { v: 2, op: "state", action: "get" });
  assert.deepEqual([set?.["ok"], (set?.["error"] as { code: string }).code], [false, "invalid_argument"]);
  assert.deepEqual([get?.["ok"], (get?.["error"] as { code: string }).code], [false, "invalid_argument"]);
  await a.close();
});

void test("the call the previous pass parked on is new to this pass: printed to the log once; earlier results are replays", async () => {
  const envelope = { type: "deploy.done", event: "evt-1", payload: { v: 2 } };
  const child = { stdout_b64: b64("hello\n"), exit: 0 };
  const cases: { journal: ReturnType<typeof entry>[]; requests: Record<string, unknown>[]; stdout: string[] }[] = [
    // activity a parked the first pass; the second pass replays it and parks on the event wait.
    {
      journal: [entry([0, "activity", "a", 0], child)],
      requests: [{ op: "activity", name: "a", argv: ["echo", "hello"] }],
      stdout: ["hello\n"],
    },
    {
      journal: [entry([0, "activity", "a", 0], child), entry([1, "wait-event", "deploy.done", 0], { envelope })],
      requests: [
        { op: "activity", name: "a", argv: ["echo", "hello"] },
        { op: "wait-event", type: "deploy.done" },
      ],
      stdout: ["hello\n", `${JSON.stringify(envelope)}\n`],
    },
    {
      journal: [entry([0, "activity-submit", "b", 0], {}), entry([1, "activity-collect", "b", 0], child)],
      requests: [
        { op: "activity-submit", name: "b", argv: ["echo", "hello"] },
        { op: "activity-collect", name: "b" },
      ],
      stdout: ["", "hello\n"],
    },
    {
      journal: [entry([0, "wait-signal", "go", 0], { payload: { n: 1 } }), entry([1, "sleep", "", 0], {})],
      requests: [
        { op: "wait-signal", name: "go" },
        { op: "sleep", duration: "1h" },
      ],
      stdout: ['{"n":1}\n', ""],
    },
  ];
  for (const { journal, requests, stdout } of cases) {
    const backend = answering(() => ({}));
    const a = await agentSocket(journal, backend);
    const answers = await a.call(...requests.map((r) => ({ v: 2, ...r })));
    const last = journal.length - 1;
    answers.forEach((answer, i) => {
      if (stdout[i] === "") return;
      assert.equal(answer?.["stdout_b64"], b64(stdout[i] as string));
      assert.equal(answer?.["replay"], i !== last, `call #${i} of ${JSON.stringify(journal.map((e) => e.kind))}`);
    });
    assert.deepEqual(callBodies(backend), [], "every answer came from the journal");
    await a.close();
  }
});
