/**
 * `flow sleep`, `flow wait-signal` and `flow lock` (bare and bracketed) on both in-script clients
 * against a protocol peer: the requests on the wire, exit codes, bounded waits and protocol v1,
 * `event:` names, parked calls that get no answer. Activities, spawn, state: client-fanout.test.ts.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { b64, forBoth, runClient, scratchPath, startClient, until } from "./client-test-kit.js";

forBoth("sleep sends the duration text as it is and exits 0 on {}", async (client, peer) => {
  const r = await runClient(client, peer, ["sleep", "1m 30s"]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [0, "", ""]);
  assert.deepEqual(peer.lines, ['{"v":2,"id":1,"op":"sleep","duration":"1m 30s"}']);
});

for (const [what, args] of [
  ["sleep", ["sleep", "1h"]],
  ["an unbounded wait-signal", ["wait-signal", "approve"]],
] as const) {
  for (const signal of ["SIGTERM", "SIGKILL"] as const) {
    forBoth(`${what} that parks gets no answer: the client waits, and prints nothing when ${signal} ends it`, async (client, peer) => {
      peer.answer = () => "hang";
      const started = startClient(client, peer, args);
      await until(() => peer.requests.length === 1, "the request");
      // No timer decides this: the signal, not an exit of its own, must be what ends the client.
      assert.equal(started.child.exitCode, null, "still waiting for the answer");
      started.child.kill(signal);
      const r = await started.done;
      assert.deepEqual([r.signal, r.stdout.toString(), r.stderr], [signal, "", ""]);
    });
  }
}

forBoth("wait-signal takes queued signals in order and prints each payload; no hello without --timeout", async (client, peer) => {
  peer.signals.set("approve", ['{"by":"ann"}', '{"by":"bob"}']);
  const first = await runClient(client, peer, ["wait-signal", "approve"]);
  const second = await runClient(client, peer, ["wait-signal", "approve"]);
  assert.deepEqual([first.code, first.stdout.toString(), first.stderr], [0, '{"by":"ann"}\n', ""]);
  assert.deepEqual([second.code, second.stdout.toString()], [0, '{"by":"bob"}\n']);
  assert.deepEqual(peer.lines, [
    '{"v":2,"id":1,"op":"wait-signal","name":"approve"}',
    '{"v":2,"id":1,"op":"wait-signal","name":"approve"}',
  ]);
});

forBoth("a bounded wait says hello first, sends the timeout text, and exits 124 with the agent's message", async (client, peer) => {
  const r = await runClient(client, peer, ["wait-signal", "approve", "--timeout", "30s"]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [124, "", 'flow wait-signal: timed out after "30s" waiting for approve\n']);
  peer.signals.set("go", ["1"]);
  const got = await runClient(client, peer, ["wait-signal", "--timeout=2h", "go"]);
  assert.deepEqual([got.code, got.stdout.toString()], [0, "1\n"]);
  assert.deepEqual(peer.lines, [
    '{"v":2,"id":0,"op":"hello"}',
    '{"v":2,"id":1,"op":"wait-signal","name":"approve","timeout":"30s"}',
    '{"v":2,"id":0,"op":"hello"}',
    '{"v":2,"id":1,"op":"wait-signal","name":"go","timeout":"2h"}',
  ]);
});

forBoth("a bounded wait is refused at the call site by a protocol-1 agent; an unbounded one is sent", async (client, peer) => {
  peer.answer = (req) => (req.op === "hello" ? { v: 1, ok: true, protocol: 1 } : undefined);
  const r = await runClient(client, peer, ["wait-signal", "approve", "--timeout", "30s"]);
  assert.deepEqual(
    [r.code, r.stdout.toString(), r.stderr],
    [1, "", "error: the agent speaks socket protocol v1; this call needs v2\nupgrade the flowsvc agent, or drop --timeout\n"],
  );
  assert.deepEqual(
    peer.requests.map((q) => q.op),
    ["hello"],
    "the wait itself was never sent",
  );
  peer.signals.set("approve", ["true"]);
  const unbounded = await runClient(client, peer, ["wait-signal", "approve"]);
  assert.deepEqual([unbounded.code, unbounded.stdout.toString()], [0, "true\n"]);
  assert.deepEqual(
    peer.requests.map((q) => q.op),
    ["hello", "wait-signal"],
  );
});

forBoth("wait-signal refuses names starting event: before it connects, exit 2", async (client, peer) => {
  for (const args of [
    ["wait-signal", "event:deploy.done"],
    ["wait-signal", "event:", "--timeout", "5s"],
  ]) {
    const r = await runClient(client, peer, args);
    assert.equal(r.code, 2, args.join(" "));
    assert.equal(
      r.stderr,
      `error: flow wait-signal: names starting with "event:" are reserved for event waits (flow wait-event): ${args[1]}\nusage: flow wait-signal <name> [--timeout <duration>]\n`,
    );
  }
  assert.equal(peer.lines.length, 0);
});

forBoth("a bare lock is one lock call", async (client, peer) => {
  const r = await runClient(client, peer, ["lock", "deploy-prod"]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [0, "", ""]);
  assert.deepEqual(peer.lines, ['{"v":2,"id":1,"op":"lock","group":"deploy-prod"}']);
});

forBoth("a bracketed lock is lock, a step lock:<group> with a sealed body, unlock; exits with the command's code", async (client, peer) => {
  const body = 'echo "socket=${FLOW_AGENT_SOCKET:-unset} key=$FLOW_IDEMPOTENCY_KEY keep=$KEEP_ME"; echo warn >&2; exit 3';
  const r = await runClient(client, peer, ["lock", "deploy", "--", "sh", "-c", body]);
  const out = "socket=unset key=idem-1 keep=kept\n";
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [3, out, "warn\n"]);
  assert.deepEqual(peer.lines, [
    '{"v":2,"id":1,"op":"lock","group":"deploy"}',
    '{"v":2,"id":2,"op":"step","name":"lock:deploy"}',
    `{"v":2,"id":3,"op":"step.complete","position":1,"stdout_b64":"${b64(out)}","exit":3}`,
    '{"v":2,"id":4,"op":"unlock","group":"deploy"}',
  ]);
  assert.deepEqual(peer.recorded.get("lock:deploy"), { stdout: Buffer.from(out), exit: 3 });
});

forBoth("a replayed bracketed lock skips the command but still sends unlock, and exits with the recorded code", async (client, peer) => {
  const marker = scratchPath("ran");
  peer.recorded.set("lock:deploy", { stdout: Buffer.from("deployed\n"), exit: 4 });
  const r = await runClient(client, peer, ["lock", "deploy", "--", "touch", marker]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [4, "deployed\n", ""]);
  assert.equal(existsSync(marker), false, "the command did not run");
  assert.deepEqual(peer.lines, [
    '{"v":2,"id":1,"op":"lock","group":"deploy"}',
    '{"v":2,"id":2,"op":"step","name":"lock:deploy"}',
    '{"v":2,"id":3,"op":"unlock","group":"deploy"}',
  ]);
});

forBoth("a bracketed lock: a refused lock runs nothing; a refused step sends no unlock; a failed unlock wins", async (client, peer) => {
  const marker = scratchPath("ran");
  peer.answer = (req) => (req.op === "lock" ? { ok: false, error: { code: "x", message: "no lease" }, exit: 5 } : undefined);
  let r = await runClient(client, peer, ["lock", "g", "--", "touch", marker]);
  assert.deepEqual([r.code, r.stderr, existsSync(marker)], [5, "error: no lease\n", false]);
  assert.deepEqual(
    peer.requests.map((q) => q.op),
    ["lock"],
  );

  const message = 'replay reached step "lock:g" at call #1, but the journal recorded step "a" there';
  peer.answer = (req) => (req.op === "step" ? { ok: false, error: { code: "determinism", message } } : undefined);
  r = await runClient(client, peer, ["lock", "g", "--", "touch", marker]);
  assert.deepEqual([r.code, r.stderr, existsSync(marker)], [1, `error: ${message}\n`, false]);
  assert.deepEqual(
    peer.requests.map((q) => q.op),
    ["lock", "lock", "step"],
  );

  peer.answer = (req) => (req.op === "unlock" ? { ok: false, error: { code: "job_lost", message: "lease lost" }, exit: 6 } : undefined);
  r = await runClient(client, peer, ["lock", "g2", "--", "true"]);
  assert.deepEqual([r.code, r.stderr], [6, "error: lease lost\n"]);
  peer.answer = (req) => (req.op === "unlock" ? { ok: true, exit: 0 } : undefined);
  r = await runClient(client, peer, ["lock", "g3", "--", "sh", "-c", "exit 7"]);
  assert.deepEqual([r.code, r.stderr], [7, ""], "an unlock that answers exit 0 keeps the command's code");
});

forBoth("sleep, wait-signal and lock: usage errors exit 2 before connecting; --help shows usage and an example", async (client, peer) => {
  const SLEEP = "usage: flow sleep <duration>\n";
  const WAIT = "usage: flow wait-signal <name> [--timeout <duration>]\n";
  const LOCK = "usage: flow lock <group> [-- <cmd...>]\n";
  const cases: Array<[string[], string]> = [
    [["sleep"], `error: flow sleep: missing duration\n${SLEEP}`],
    [["sleep", ""], `error: flow sleep: missing duration\n${SLEEP}`],
    [["sleep", "5s", "10s"], `error: flow sleep: unexpected argument 10s\n${SLEEP}`],
    [["sleep", "-5s"], `error: flow sleep: unknown option -5s\n${SLEEP}`],
    [["wait-signal"], `error: flow wait-signal: missing signal name\n${WAIT}`],
    [["wait-signal", "a", "b"], `error: flow wait-signal: unexpected argument b\n${WAIT}`],
    [["wait-signal", "a", "--timeout"], `error: flow wait-signal: --timeout needs a value\n${WAIT}`],
    [["wait-signal", "a", "--timeout="], `error: flow wait-signal: --timeout needs a value\n${WAIT}`],
    [["wait-signal", "a", "--timeouts", "1s"], `error: flow wait-signal: unknown option --timeouts\n${WAIT}`],
    [["lock"], `error: flow lock: missing lock group\n${LOCK}`],
    [["lock", "--", "make"], `error: flow lock: missing lock group\n${LOCK}`],
    [["lock", "g", "--"], `error: flow lock: missing command after --\n${LOCK}`],
    [["lock", "g", "make"], `error: flow lock: unexpected argument (put the command after --): make\n${LOCK}`],
    [["lock", "g", "--wait", "--", "make"], `error: flow lock: unknown option --wait\n${LOCK}`],
  ];
  for (const [args, stderr] of cases) {
    const r = await runClient(client, peer, args);
    assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [2, "", stderr], args.join(" "));
  }
  assert.equal(peer.lines.length, 0);
  for (const [args, usage] of [
    [["sleep", "--help"], SLEEP],
    [["wait-signal", "-h"], WAIT],
    [["lock", "g", "--help", "--", "x"], LOCK],
  ] as const) {
    const help = await runClient(client, peer, args, { env: {} });
    assert.equal(help.code, 0);
    assert.match(help.stdout.toString(), new RegExp(`^${usage.replace(/[[\]().*|]/g, "\\$&")}.+\nexample: flow ${args[0]} .+\n$`));
  }
});
