/**
 * `flow emit` and `flow wait-event` on both in-script clients against a protocol peer: the
 * requests on the wire (a --payload travels as compact JSON), the printed id and envelope, usage
 * errors and invalid JSON (exit 2, nothing sent), bounded waits (hello first, protocol-1 refusal,
 * 124). Which client takes `flow emit` (in a script or not): client-commands.test.ts.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { test } from "node:test";
import { b64, forBoth, runClient, runShell, scratchPath, startClient, until } from "./client-test-kit.js";
import { compactJson } from "./event-args.js";

const EMIT = "usage: flow emit <type> [--key <subject>] [--payload <json>]\n";
const WAIT = "usage: flow wait-event <type> [--timeout <duration>]\n";
const BAD_JSON = "error: flow emit: --payload is not valid JSON (a string needs its quotes: --payload '\"text\"')\n";

forBoth("emit sends the type, the key and the payload as compact JSON, and prints the event id", async (client, peer) => {
  let r = await runClient(client, peer, ["emit", "deploy.done"]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [0, "evt-peer-1\n", ""]);
  const payload = '{\n  "v" : 2,\r\n\t"list": [ 1, 2.50, -0e+3, 1E400, "a b\\n\\t\\u00e9\\"\\\\\\/", "é 😀", true , null, {}, [ ] ]\n}\n';
  r = await runClient(client, peer, ["emit", "--payload", payload, "deploy_2-x.Y", "--key", "acme/web"]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [0, "evt-peer-2\n", ""]);
  r = await runClient(client, peer, ["emit", "t", "--key=a b", '--payload=  "text" ']);
  assert.equal(r.code, 0, r.stderr);
  r = await runClient(client, peer, ["emit", "t", "--payload", "null", "--payload", "42"]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(peer.lines, [
    '{"v":2,"id":1,"op":"emit","type":"deploy.done"}',
    '{"v":2,"id":1,"op":"emit","type":"deploy_2-x.Y","key":"acme/web","payload":{"v":2,"list":[1,2.50,-0e+3,1E400,"a b\\n\\t\\u00e9\\"\\\\\\/","é 😀",true,null,{},[]]}}',
    '{"v":2,"id":1,"op":"emit","type":"t","key":"a b","payload":"text"}',
    '{"v":2,"id":1,"op":"emit","type":"t","payload":42}',
  ]);
});

forBoth("emit takes a payload nested 50000 deep (no recursion limit in either client)", async (client, peer) => {
  const deep = `${"[".repeat(50_000)}${"]".repeat(50_000)}`;
  const r = await runClient(client, peer, ["emit", "deep", "--payload", ` ${deep} `]);
  assert.deepEqual([r.code, r.stderr], [0, ""]);
  assert.equal(peer.lines[0], `{"v":2,"id":1,"op":"emit","type":"deep","payload":${deep}}`);
  const unbalanced = await runClient(client, peer, ["emit", "deep", "--payload", `${deep}]`]);
  assert.deepEqual([unbalanced.code, unbalanced.stderr], [2, `${BAD_JSON}${EMIT}`]);
});

forBoth("bytes that are not UTF-8 in a payload string reach the agent as U+FFFD", async (client, peer) => {
  const r = await runShell(client, peer, '"$CLIENT" emit t --payload "$(printf \'["a\\377\\303b\\355\\240\\200"]\')"');
  assert.deepEqual([r.code, r.stderr], [0, ""]);
  assert.deepEqual(
    peer.emitted.map((q) => q.payload),
    [["a\uFFFD\uFFFDb\uFFFD\uFFFD\uFFFD"]],
  );
});

const invalidPayloads = [
  "",
  " ",
  "hello",
  "{",
  "}",
  "[1,]",
  '{"a":1,}',
  "{'a':1}",
  '{"a" 1}',
  "{1:2}",
  "01",
  "-",
  "1.",
  ".5",
  "+1",
  "1e",
  "0x10",
  "NaN",
  "Infinity",
  "tru",
  "nul",
  "True",
  "[1] [2]",
  "1 2",
  '"unterminated',
  '"a\tb"',
  '"\\x"',
  '"\\u12"',
  '"\\u12g4"',
  "\uFEFF1",
  "[1]]",
  "{]",
  '{"a":}',
  "// c\n1",
  "\u00a01",
];

void test("compactJson refuses what JSON.parse refuses and keeps every token as written", () => {
  for (const text of invalidPayloads) assert.equal(compactJson(text), undefined, JSON.stringify(text));
  assert.equal(compactJson(' [ "a \\" b" , "\\\\" , 1.50e-3 ] '), '["a \\" b","\\\\",1.50e-3]');
});

forBoth("emit refuses a --payload that is not JSON with exit 2, before it connects", async (client, peer) => {
  for (const text of invalidPayloads) {
    const r = await runClient(client, peer, ["emit", "t", "--payload", text]);
    assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [2, "", `${BAD_JSON}${EMIT}`], JSON.stringify(text));
  }
  const r = await runClient(client, peer, ["emit", "t", "--payload=hello"], { env: { FLOW_IDEMPOTENCY_KEY: "k" } });
  assert.deepEqual([r.code, r.stderr], [2, `${BAD_JSON}${EMIT}`], "in a step body a usage error wins over the missing socket");
  assert.equal(peer.lines.length, 0);
});

forBoth("emit and wait-event: usage errors exit 2 before connecting; --help shows usage and an example", async (client, peer) => {
  const long = "a".repeat(65);
  const cases: Array<[string[], string]> = [
    [["emit"], `error: flow emit: missing event type\n${EMIT}`],
    [["emit", ""], `error: flow emit: missing event type\n${EMIT}`],
    [["emit", "a b"], `error: flow emit: an event type is 1-64 characters from [A-Za-z0-9._-], got a b\n${EMIT}`],
    [["emit", "deploy/done"], `error: flow emit: an event type is 1-64 characters from [A-Za-z0-9._-], got deploy/done\n${EMIT}`],
    [["emit", "é"], `error: flow emit: an event type is 1-64 characters from [A-Za-z0-9._-], got é\n${EMIT}`],
    [["emit", long], `error: flow emit: an event type is 1-64 characters from [A-Za-z0-9._-], got ${long}\n${EMIT}`],
    [["emit", "a", "b"], `error: flow emit: unexpected argument b\n${EMIT}`],
    [["emit", "a", "--key"], `error: flow emit: --key needs a value\n${EMIT}`],
    [["emit", "a", "--key="], `error: flow emit: --key needs a value\n${EMIT}`],
    [["emit", "a", "--payload"], `error: flow emit: --payload needs a value\n${EMIT}`],
    [["emit", "a", "--data", "1"], `error: flow emit: unknown option --data\n${EMIT}`],
    [["emit", "-x"], `error: flow emit: unknown option -x\n${EMIT}`],
    [["wait-event"], `error: flow wait-event: missing event type\n${WAIT}`],
    [
      ["wait-event", "event:deploy"],
      `error: flow wait-event: an event type is 1-64 characters from [A-Za-z0-9._-], got event:deploy\n${WAIT}`,
    ],
    [
      ["wait-event", long, "--timeout", "1s"],
      `error: flow wait-event: an event type is 1-64 characters from [A-Za-z0-9._-], got ${long}\n${WAIT}`,
    ],
    [["wait-event", "a", "b"], `error: flow wait-event: unexpected argument b\n${WAIT}`],
    [["wait-event", "a", "--timeout"], `error: flow wait-event: --timeout needs a value\n${WAIT}`],
    [["wait-event", "a", "--timeout="], `error: flow wait-event: --timeout needs a value\n${WAIT}`],
    [["wait-event", "a", "--key", "k"], `error: flow wait-event: unknown option --key\n${WAIT}`],
  ];
  for (const [args, stderr] of cases) {
    const r = await runClient(client, peer, args);
    assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [2, "", stderr], args.join(" "));
  }
  assert.equal(peer.lines.length, 0);
  for (const [args, usage] of [
    [["emit", "--help"], EMIT],
    [["wait-event", "x", "-h"], WAIT],
  ] as const) {
    const help = await runClient(client, peer, args, { env: { FLOW_AGENT_SOCKET: "/nowhere" } });
    assert.equal(help.code, 0);
    assert.match(help.stdout.toString(), new RegExp(`^${usage.replace(/[[\]().*|]/g, "\\$&")}.+\nexample: flow ${args[0]} .+\n$`));
  }
});

forBoth("the agent's refusal of an emit (a reserved type) is printed with its exit", async (client, peer) => {
  const message = 'type: event type "run.failed" is reserved for the platform (push, manual, schedule.tick, spawn, run.*, flow.*)';
  peer.answer = (req) => (req.op === "emit" ? { ok: false, error: { code: "invalid_argument", message }, exit: 2 } : undefined);
  const r = await runClient(client, peer, ["emit", "run.failed"]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [2, "", `error: ${message}\n`]);
});

forBoth("a replayed emit prints the recorded id in $(...) and nothing on the capture pipe", async (client, peer) => {
  const fifo = scratchPath("capture");
  const log = scratchPath("log");
  assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
  peer.captureIno = statSync(fifo).ino;
  peer.answer = (req) =>
    req.op === "emit"
      ? { ok: true, replay: true, capture_ino: peer.captureIno, stdout_b64: b64("evt-old\n"), event_id: "evt-old" }
      : undefined;
  const script = 'cat "$FIFO" > "$LOG" & (id=$("$CLIENT" emit t); echo "id=$id"; "$CLIENT" emit t) > "$FIFO"; c=$?; wait; exit $c';
  const r = await runShell(client, peer, script, { FIFO: fifo, LOG: log });
  assert.deepEqual([r.code, r.stderr], [0, ""]);
  assert.equal(readFileSync(log, "utf8"), "id=evt-old\n");
});

forBoth("wait-event prints the envelope of each event in order; no hello without --timeout", async (client, peer) => {
  const first = { type: "deploy.done", event: "evt-1", key: "acme/web", payload: { v: 2, s: "é" } };
  peer.events.set("deploy.done", [first, { type: "deploy.done", event: "evt-2", payload: null }]);
  const a = await runClient(client, peer, ["wait-event", "deploy.done"]);
  const b = await runClient(client, peer, ["wait-event", "--", "deploy.done"]);
  assert.deepEqual([a.code, a.stdout.toString(), a.stderr], [0, `${JSON.stringify(first)}\n`, ""]);
  assert.deepEqual([b.code, b.stdout.toString()], [0, '{"type":"deploy.done","event":"evt-2","payload":null}\n']);
  assert.deepEqual(peer.lines, [
    '{"v":2,"id":1,"op":"wait-event","type":"deploy.done"}',
    '{"v":2,"id":1,"op":"wait-event","type":"deploy.done"}',
  ]);
});

forBoth("a bounded wait-event says hello first, sends the timeout text, and exits 124 with the agent's message", async (client, peer) => {
  const r = await runClient(client, peer, ["wait-event", "deploy.done", "--timeout", "30s"]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [124, "", "flow: wait-event deploy.done timed out\n"]);
  peer.events.set("go", [{ type: "go", event: "evt-9", payload: 1 }]);
  const got = await runClient(client, peer, ["wait-event", "--timeout=2h", "go"]);
  assert.deepEqual([got.code, got.stdout.toString()], [0, '{"type":"go","event":"evt-9","payload":1}\n']);
  assert.deepEqual(peer.lines, [
    '{"v":2,"id":0,"op":"hello"}',
    '{"v":2,"id":1,"op":"wait-event","type":"deploy.done","timeout":"30s"}',
    '{"v":2,"id":0,"op":"hello"}',
    '{"v":2,"id":1,"op":"wait-event","type":"go","timeout":"2h"}',
  ]);
});

forBoth("a bounded wait-event is refused at the call site by a protocol-1 agent; an unbounded one is sent", async (client, peer) => {
  peer.answer = (req) => (req.op === "hello" ? { v: 1, ok: true, protocol: 1 } : undefined);
  const r = await runClient(client, peer, ["wait-event", "deploy.done", "--timeout", "30s"]);
  assert.deepEqual(
    [r.code, r.stdout.toString(), r.stderr],
    [1, "", "error: the agent speaks socket protocol v1; this call needs v2\nupgrade the flowsvc agent, or drop --timeout\n"],
  );
  assert.deepEqual(
    peer.requests.map((q) => q.op),
    ["hello"],
    "the wait itself was never sent",
  );
  peer.events.set("deploy.done", [{ type: "deploy.done", event: "evt-1", payload: null }]);
  const unbounded = await runClient(client, peer, ["wait-event", "deploy.done"]);
  assert.equal(unbounded.code, 0, unbounded.stderr);
  assert.deepEqual(
    peer.requests.map((q) => q.op),
    ["hello", "wait-event"],
  );
});

forBoth("a wait-event that parks gets no answer: the client waits, and prints nothing when SIGTERM ends it", async (client, peer) => {
  const started = startClient(client, peer, ["wait-event", "deploy.done"]);
  await until(() => peer.requests.length === 1, "the request");
  // No timer decides this: the client has sent its request and has no answer; the signal, not an
  // exit of its own, is what ends it (an exit code instead of SIGTERM would fail the test).
  assert.equal(started.child.exitCode, null, "still waiting for the answer");
  started.child.kill("SIGTERM");
  const r = await started.done;
  assert.deepEqual([r.signal, r.stdout.toString(), r.stderr], ["SIGTERM", "", ""]);
  assert.equal(peer.requests.length, 1, "nothing else was sent");
});
