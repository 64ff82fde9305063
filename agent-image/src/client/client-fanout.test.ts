/**
 * `flow activity*`, `flow spawn` and `flow state` on both in-script clients against a protocol
 * peer: the requests on the wire, output and exit codes, stdin inputs, usage errors, and the
 * generic answer handling (replayed output on the capture pipe). Waits and locks: client-waits.test.ts.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { b64, forBoth, runClient, runShell, scratchPath } from "./client-test-kit.js";

forBoth("activity sends its name, argv and requires; prints the child's stdout and exits with its code", async (client, peer) => {
  peer.children.set("render", { stdout: Buffer.from("frame 1\n"), exit: 3 });
  const r = await runClient(client, peer, [
    "activity",
    "render",
    "--requires",
    "gpu",
    "--requires=polyglot",
    "--",
    "sh",
    "-c",
    'echo "$1"',
    "x",
    "--requires",
  ]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [3, "frame 1\n", ""]);
  assert.deepEqual(peer.lines, [
    '{"v":2,"id":1,"op":"activity","name":"render","argv":["sh","-c","echo \\"$1\\"","x","--requires"],"requires":["gpu","polyglot"]}',
  ]);
  await runClient(client, peer, ["activity", "plain", "--", "true"]);
  assert.equal(peer.lines[1], '{"v":2,"id":1,"op":"activity","name":"plain","argv":["true"],"requires":[]}');
});

forBoth(
  "activity-submit returns at once; collect prints a child's stdout with its code; wait-all counts failures",
  async (client, peer) => {
    peer.children.set("a", { stdout: Buffer.from("A\n"), exit: 0 });
    peer.children.set("b", { stdout: Buffer.from("B\n"), exit: 2 });
    peer.children.set("c", { stdout: Buffer.from(""), exit: 1 });
    for (const name of ["a", "b", "c"]) {
      const r = await runClient(client, peer, ["activity-submit", name, "--requires", "polyglot", "--", "./work.sh", name]);
      assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [0, "", ""]);
    }
    const collected = await runClient(client, peer, ["activity-collect", "b"]);
    assert.deepEqual([collected.code, collected.stdout.toString()], [2, "B\n"]);
    const waited = await runClient(client, peer, ["activity-wait-all"]);
    assert.deepEqual([waited.code, waited.stdout.toString()], [0, "1\n"]);
    assert.deepEqual(peer.lines.slice(2), [
      '{"v":2,"id":1,"op":"activity-submit","name":"c","argv":["./work.sh","c"],"requires":["polyglot"]}',
      '{"v":2,"id":1,"op":"activity-collect","name":"b"}',
      '{"v":2,"id":1,"op":"activity-wait-all"}',
    ]);
  },
);

const script = scratchPath("deploy.sh");
writeFileSync(script, "#!/bin/sh\necho deploying \u00e9\n");
forBoth("spawn sends the file's bytes, its base name, --as (default script) and the tags; prints the run id", async (client, peer) => {
  let r = await runClient(client, peer, ["spawn", script]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [0, "run-child-1\n", ""]);
  r = await runClient(client, peer, ["spawn", "--tag", "nightly", script, "--as", "pipeline", "--tag=prod"]);
  assert.deepEqual([r.code, r.stdout.toString()], [0, "run-child-2\n"]);
  const source = b64("#!/bin/sh\necho deploying \u00e9\n");
  assert.deepEqual(peer.lines, [
    `{"v":2,"id":1,"op":"spawn","source_b64":"${source}","filename":"${script.slice(script.lastIndexOf("/") + 1)}","as":"script","tags":[]}`,
    `{"v":2,"id":1,"op":"spawn","source_b64":"${source}","filename":"${script.slice(script.lastIndexOf("/") + 1)}","as":"pipeline","tags":["nightly","prod"]}`,
  ]);
});

forBoth("spawn - reads the source from stdin, byte for byte, as stdin.sh", async (client, peer) => {
  const bytes = Buffer.from([0x23, 0x21, 0, 0xff, 0x0a, 0xc3, 0xa9, 0x0a, 0x0a]);
  const r = await runClient(client, peer, ["spawn", "-", "--tag", "a"], { stdin: bytes });
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [0, "run-child-1\n", ""]);
  assert.deepEqual(peer.lines, [
    `{"v":2,"id":1,"op":"spawn","source_b64":"${bytes.toString("base64")}","filename":"stdin.sh","as":"script","tags":["a"]}`,
  ]);
});

const dir = scratchPath("a-dir");
mkdirSync(dir);
forBoth("spawn of a file it cannot read says why and exits 1 without a request", async (client, peer) => {
  const missing = scratchPath("missing.sh");
  let r = await runClient(client, peer, ["spawn", missing]);
  assert.deepEqual([r.code, r.stderr], [1, `error: cannot read ${missing}: No such file or directory\n`]);
  r = await runClient(client, peer, ["spawn", dir]);
  assert.deepEqual([r.code, r.stderr], [1, `error: cannot read ${dir}: Is a directory\n`]);
  assert.equal(peer.lines.length, 0);
});

forBoth("state set, get, list and delete, run-private and --entity; the agent's answer is printed", async (client, peer) => {
  const calls: string[][] = [
    ["state", "set", "version", "1.4.2"],
    ["state", "set", "--entity", "prod", "cfg", '{"a":1}'],
    ["state", "get", "version"],
    ["state", "get", "cfg", "--entity=prod"],
    ["state", "list"],
    ["state", "delete", "version"],
    ["state", "get", "version"],
    ["state", "set", "n", "--", "-5"],
  ];
  const outs: string[] = [];
  for (const args of calls) {
    const r = await runClient(client, peer, args);
    assert.deepEqual([r.code, r.stderr], [0, ""], args.join(" "));
    outs.push(r.stdout.toString());
  }
  assert.deepEqual(outs, ["", "", "1.4.2\n", '{"a":1}\n', "version\t1.4.2\n", "", "", ""]);
  assert.deepEqual(peer.lines, [
    '{"v":2,"id":1,"op":"state","action":"set","key":"version","value":"1.4.2"}',
    '{"v":2,"id":1,"op":"state","action":"set","key":"cfg","entity":"prod","value":"{\\"a\\":1}"}',
    '{"v":2,"id":1,"op":"state","action":"get","key":"version"}',
    '{"v":2,"id":1,"op":"state","action":"get","key":"cfg","entity":"prod"}',
    '{"v":2,"id":1,"op":"state","action":"list"}',
    '{"v":2,"id":1,"op":"state","action":"delete","key":"version"}',
    '{"v":2,"id":1,"op":"state","action":"get","key":"version"}',
    '{"v":2,"id":1,"op":"state","action":"set","key":"n","value":"-5"}',
  ]);
});

forBoth("state set - reads stdin with one trailing newline stripped", async (client, peer) => {
  for (const stdin of ['{"big":true}\n', "two\n\n", "none", "crlf\r\n", ""])
    await runClient(client, peer, ["state", "set", "k", "-", "--entity", "e"], { stdin });
  assert.deepEqual(
    peer.requests.map((q) => q.value),
    ['{"big":true}', "two\n", "none", "crlf\r", ""],
  );
  assert.equal(peer.lines[0], '{"v":2,"id":1,"op":"state","action":"set","key":"k","entity":"e","value":"{\\"big\\":true}"}');
});

forBoth("a replayed answer is not re-printed on the capture pipe, but is in a $(...) substitution", async (client, peer) => {
  const fifo = scratchPath("capture");
  assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
  peer.captureIno = statSync(fifo).ino;
  peer.answer = (req) =>
    req.op === "hello" ? undefined : { ok: true, replay: true, capture_ino: peer.captureIno, stdout_b64: b64("run-old\n") };
  const log = scratchPath("log");
  let r = await runShell(client, peer, 'cat "$FIFO" > "$LOG" & "$CLIENT" spawn - < /dev/null > "$FIFO"; c=$?; wait; cat "$LOG"; exit $c', {
    FIFO: fifo,
    LOG: log,
  });
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [0, "", ""]);
  r = await runShell(client, peer, 'id=$("$CLIENT" activity-collect a); printf "[%s]" "$id"');
  assert.deepEqual([r.code, r.stdout.toString()], [0, "[run-old]"]);
});

forBoth("activity, spawn and state: usage errors exit 2 before connecting; --help shows usage and an example", async (client, peer) => {
  const ACT = "usage: flow activity <name> [--requires <capability>]... -- <cmd...>\n";
  const SUB = "usage: flow activity-submit <name> [--requires <capability>]... -- <cmd...>\n";
  const COL = "usage: flow activity-collect <name>\n";
  const ALL = "usage: flow activity-wait-all\n";
  const SPAWN = "usage: flow spawn <file|-> [--as pipeline|script] [--tag <tag>]...\n";
  const STATE = "usage: flow state get <key> | set <key> <value|-> | delete <key> | list [--entity <name>]\n";
  const cases: Array<[string[], string]> = [
    [["activity"], `error: flow activity: missing activity name\n${ACT}`],
    [["activity", "a"], `error: flow activity: missing -- before the command\n${ACT}`],
    [["activity", "a", "--"], `error: flow activity: missing command after --\n${ACT}`],
    [["activity", "a", "b", "--", "x"], `error: flow activity: unexpected argument (put the command after --): b\n${ACT}`],
    [["activity", "a", "--requires"], `error: flow activity: --requires needs a value\n${ACT}`],
    [["activity-submit", "a", "--require", "gpu", "--", "x"], `error: flow activity-submit: unknown option --require\n${SUB}`],
    [["activity-collect"], `error: flow activity-collect: missing activity name\n${COL}`],
    [["activity-collect", "a", "b"], `error: flow activity-collect: unexpected argument b\n${COL}`],
    [["activity-wait-all", "a"], `error: flow activity-wait-all: unexpected argument a\n${ALL}`],
    [["activity-wait-all", "--all"], `error: flow activity-wait-all: unknown option --all\n${ALL}`],
    [["spawn"], `error: flow spawn: missing file (a path, or - for stdin)\n${SPAWN}`],
    [["spawn", "a.sh", "b.sh"], `error: flow spawn: unexpected argument b.sh\n${SPAWN}`],
    [["spawn", "a.sh", "--as", "graph"], `error: flow spawn: --as takes pipeline or script, got graph\n${SPAWN}`],
    [["spawn", "a.sh", "--tag"], `error: flow spawn: --tag needs a value\n${SPAWN}`],
    [["state"], `error: flow state: missing action (get, set, delete or list)\n${STATE}`],
    [["state", "put", "k"], `error: flow state: unknown action put\n${STATE}`],
    [["state", "get"], `error: flow state: missing key\n${STATE}`],
    [["state", "delete", ""], `error: flow state: missing key\n${STATE}`],
    [["state", "set", "k"], `error: flow state: missing value (or - for stdin)\n${STATE}`],
    [["state", "get", "k", "v"], `error: flow state: unexpected argument v\n${STATE}`],
    [["state", "list", "k"], `error: flow state: unexpected argument k\n${STATE}`],
    [["state", "set", "n", "-5"], `error: flow state: unknown option -5\n${STATE}`],
    [["state", "get", "k", "--entity"], `error: flow state: --entity needs a value\n${STATE}`],
  ];
  for (const [args, stderr] of cases) {
    const r = await runClient(client, peer, args);
    assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [2, "", stderr], args.join(" "));
  }
  assert.equal(peer.lines.length, 0);
  for (const [args, usage] of [
    [["activity", "--help"], ACT],
    [["activity-submit", "-h"], SUB],
    [["activity-collect", "--help"], COL],
    [["activity-wait-all", "--help"], ALL],
    [["spawn", "--help"], SPAWN],
    [["state", "get", "--help"], STATE],
  ] as const) {
    const help = await runClient(client, peer, args, { env: {} });
    assert.equal(help.code, 0, args.join(" "));
    assert.ok(help.stdout.toString().startsWith(usage), args.join(" "));
    assert.match(help.stdout.toString(), /\nexample: .*flow .+\n$/);
  }
});

forBoth(
  "a result new to this pass (replay false: it arrived while the run was parked) is printed on the capture pipe",
  async (client, peer) => {
    const fifo = scratchPath("capture-new");
    assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
    peer.captureIno = statSync(fifo).ino;
    peer.answer = (req) =>
      req.op === "hello"
        ? undefined
        : { ok: true, replay: false, capture_ino: peer.captureIno, stdout_b64: b64(`${String(req.op)}-out\n`) };
    const log = scratchPath("log-new");
    const calls = '"$CLIENT" activity a -- echo x; "$CLIENT" activity-collect b; "$CLIENT" wait-event t.x; "$CLIENT" wait-signal go';
    const r = await runShell(client, peer, `cat "$FIFO" > "$LOG" & { ${calls}; } > "$FIFO"; c=$?; wait; cat "$LOG"; exit $c`, {
      FIFO: fifo,
      LOG: log,
    });
    assert.deepEqual(
      [r.code, r.stdout.toString(), r.stderr],
      [0, "activity-out\nactivity-collect-out\nwait-event-out\nwait-signal-out\n", ""],
    );
  },
);

const definition = scratchPath("child.json");
writeFileSync(definition, '{"version":"flowsvc-graph/v1","nodes":[],"edges":[]}\n');
forBoth(
  "call sends node+config, graph+input or the definition's bytes (JSON flags compacted); prints the output; a failed child exits 1",
  async (client, peer) => {
    let r = await runClient(client, peer, ["call", "node", "emit", "--config", '{ "type" : "built" }']);
    assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [0, '{"called":"emit"}\n', ""]);
    r = await runClient(client, peer, ["call", "graph", "deploy", "--input", '{"ref": "main"}']);
    assert.deepEqual([r.code, r.stdout.toString()], [0, '{"called":"deploy"}\n']);
    r = await runClient(client, peer, ["call", "graph", "--definition", definition]);
    assert.deepEqual([r.code, r.stdout.toString()], [0, '{"called":"definition"}\n']);
    r = await runClient(client, peer, ["call", "graph", "--definition", "-"], { stdin: Buffer.from("{}") });
    assert.equal(r.code, 0);
    r = await runClient(client, peer, ["call", "graph", "broken"]);
    assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [1, "", "flow: call: child run run-child-x failed: node a failed\n"]);
    assert.deepEqual(peer.lines, [
      '{"v":2,"id":1,"op":"call","node":"emit","config":{"type":"built"}}',
      '{"v":2,"id":1,"op":"call","graph":"deploy","input":{"ref":"main"}}',
      `{"v":2,"id":1,"op":"call","definition_b64":"${b64('{"version":"flowsvc-graph/v1","nodes":[],"edges":[]}\n')}"}`,
      `{"v":2,"id":1,"op":"call","definition_b64":"${b64("{}")}"}`,
      '{"v":2,"id":1,"op":"call","graph":"broken"}',
    ]);
  },
);

forBoth("call refuses bad usage with exit 2 and sends nothing", async (client, peer) => {
  for (const args of [
    ["call"],
    ["call", "job", "x"],
    ["call", "node"],
    ["call", "node", "emit", "--input", "{}"],
    ["call", "node", "emit", "--config", "{nope"],
    ["call", "node", "emit", "--config", '{"a":1e400'],
    ["call", "graph"],
    ["call", "graph", "g", "--definition", "-"],
    ["call", "graph", "g", "--config", "{}"],
    ["call", "graph", "g", "--input", "[1,]"],
    ["call", "graph", "--definition", "-", "--input", "[1,]"],
  ]) {
    const r = await runClient(client, peer, args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, /^error: flow call: .*\nusage: flow call node/, args.join(" "));
  }
  assert.equal(peer.lines.length, 0);
});
