/**
 * `flow output set`, `flow annotate`, usage and protocol errors, and the hand-off of other
 * commands to the user CLI, on both in-script clients. `flow step`: client.test.ts; sleep,
 * wait-signal, lock: client-waits.test.ts; activity*, spawn, state: client-fanout.test.ts.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { b64, clients, forBoth, repoRoot, run, runClient, runShell, scratchPath } from "./client-test-kit.js";
import type { Client } from "./client-test-kit.js";
import { ProtocolPeer } from "./client-test-peer.js";
import { AgentConnection } from "./connection.js";
import { ClientError } from "./io.js";
import { IN_SCRIPT_COMMANDS, SHARED_COMMANDS, runInScriptCommand, runsInScript } from "./index.js";

const NOT_SET = (cmd: string): string =>
  `error: FLOW_AGENT_SOCKET is not set\nflow ${cmd} works only inside a script run by flowsvc (flow submit / flow run)\n`;

forBoth("output set sends the pairs as one object; a repeated key keeps its place and its last value", async (client, peer) => {
  const r = await runClient(client, peer, ["output", "set", "a=1", "b=x=y", "2=two", "a=3", "empty="]);
  assert.deepEqual([r.code, r.stderr], [0, ""]);
  assert.equal(peer.lines[0], '{"v":2,"id":1,"op":"output.set","values":{"a":"3","b":"x=y","2":"two","empty":""}}');
});

forBoth("annotate sends its argument, or stdin for -, as markdown", async (client, peer) => {
  const md = '# Done\n\t**1.4.2** é 😀 \u0001 "q" \\ \u2028';
  let r = await runClient(client, peer, ["annotate", md]);
  assert.deepEqual([r.code, r.stderr], [0, ""]);
  r = await runClient(client, peer, ["annotate", "-"], { stdin: `from stdin\n${md}\u0000end` });
  assert.deepEqual([r.code, r.stderr], [0, ""]);
  assert.deepEqual(peer.annotations, [md, `from stdin\n${md}\u0000end`]);
});

forBoth("bytes that are not UTF-8 reach the agent as U+FFFD, the same from both clients", async (client, peer) => {
  const r = await runShell(client, peer, '"$CLIENT" annotate "$(printf "a\\377\\303b\\342\\202|\\355\\240\\200x\\360\\220\\200")"');
  assert.deepEqual([r.code, r.stderr], [0, ""]);
  assert.deepEqual(peer.annotations, ["a\uFFFD\uFFFDb\uFFFD|\uFFFD\uFFFD\uFFFDx\uFFFD"]);
});

forBoth("an answer's stdout_b64, stderr and exit are applied", async (client, peer) => {
  peer.answer = () => ({ ok: true, stdout_b64: b64("out\n"), stderr: "warn\n", exit: 4 });
  const r = await runClient(client, peer, ["output", "set", "k=v"]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [4, "out\n", "warn\n"]);
});

forBoth("escapes in an answer are decoded: \\uXXXX, surrogate pairs, a lone surrogate as U+FFFD", async (client, peer) => {
  const raw =
    '{"v":2,"ok":false,"error":{"code":"x","message":"caf\\u00e9 \\ud83d\\ude00 \\ud800 t\\tq\\"\\/\\\\","details":[1,{"a":null}]},"exit":7}\n';
  peer.answer = () => ({ raw });
  const r = await runClient(client, peer, ["annotate", "x"]);
  assert.equal(r.code, 7);
  assert.equal(r.stderr, 'error: café 😀 \uFFFD t\tq"/\\\n');
});

forBoth("FLOW_AGENT_SOCKET unset or empty: the call says where flow works and exits 1", async (client, peer) => {
  const envs: Array<Record<string, string>> = [{}, { FLOW_AGENT_SOCKET: "" }];
  for (const env of envs) {
    for (const cmd of ["step", "annotate", "output", "sleep"]) {
      const args = cmd === "step" ? ["step", "a", "--", "true"] : cmd === "output" ? ["output", "set", "a=b"] : [cmd, "x"];
      const r = await runClient(client, peer, args, { env });
      assert.deepEqual([r.code, r.stdout.length, r.stderr], [1, 0, NOT_SET(cmd)], `${cmd} ${JSON.stringify(env)}`);
    }
  }
  assert.equal(peer.lines.length, 0);
});

forBoth("an in-script command this client does not speak yet says so", async (client, peer) => {
  for (const name of ["call"]) {
    const r = await runClient(client, peer, [name, "x"]);
    assert.deepEqual([r.code, r.stderr], [1, `error: flow ${name} is not supported by this version of the in-script client\n`]);
  }
  assert.equal(peer.lines.length, 0);
});

forBoth("usage errors exit 2 with the usage line; --help prints it with an example", async (client, peer) => {
  const STEP = "usage: flow step <name> [--label <text>] -- <cmd...>\n";
  const OUTPUT = "usage: flow output set <key>=<value>...\n";
  const ANNOTATE = "usage: flow annotate <markdown|->\n";
  const cases: Array<[string[], string]> = [
    [["step"], `error: flow step: missing step name\n${STEP}`],
    [["step", "build"], `error: flow step: missing -- before the command\n${STEP}`],
    [["step", "build", "make"], `error: flow step: unexpected argument (put the command after --): make\n${STEP}`],
    [["step", "build", "--"], `error: flow step: missing command after --\n${STEP}`],
    [["step", "build", "--label"], `error: flow step: --label needs a value\n${STEP}`],
    [["step", "build", "--retry", "--", "x"], `error: flow step: unknown option --retry\n${STEP}`],
    [["step", "", "--", "x"], `error: flow step: missing step name\n${STEP}`],
    [["output"], `error: flow output: missing subcommand (set)\n${OUTPUT}`],
    [["output", "get"], `error: flow output: unknown subcommand get\n${OUTPUT}`],
    [["output", "set"], `error: flow output: missing <key>=<value>\n${OUTPUT}`],
    [["output", "set", "a=1", "novalue"], `error: flow output: expected <key>=<value>, got novalue\n${OUTPUT}`],
    [["output", "set", "=1"], `error: flow output: expected <key>=<value>, got =1\n${OUTPUT}`],
    [["annotate"], `error: flow annotate: missing markdown\n${ANNOTATE}`],
    [["annotate", "two", "words"], `error: flow annotate: takes one argument (quote the markdown, or pass - to read stdin)\n${ANNOTATE}`],
  ];
  for (const [args, stderr] of cases) {
    const r = await runClient(client, peer, args);
    assert.deepEqual([r.code, r.stderr], [2, stderr], args.join(" "));
  }
  const help = await runClient(client, peer, ["step", "build", "--help", "--", "make"], { env: {} });
  assert.equal(help.code, 0);
  assert.match(help.stdout.toString(), /^usage: flow step .*\n.*\nexample: flow step build /);
  assert.equal(peer.lines.length, 0);
});

forBoth("a client that cannot reach the agent says so and exits 1", async (client, peer) => {
  const path = scratchPath("missing.sock");
  const r = await runClient(client, peer, ["step", "a", "--", "true"], { env: { FLOW_AGENT_SOCKET: path } });
  assert.deepEqual([r.code, r.stderr], [1, `error: cannot connect to the agent at ${path}: No such file or directory\n`]);
});

forBoth("a malformed or missing answer is an error of the client, exit 1", async (client, peer) => {
  const cases: Array<[ReturnType<NonNullable<ProtocolPeer["answer"]>>, string]> = [
    [{ raw: "not json\n" }, "malformed response from the agent: not a JSON object"],
    [{ raw: "[1]\n" }, "malformed response from the agent: not a JSON object"],
    [{ raw: '{"v":2,"ok":true} x\n' }, "malformed response from the agent: not a JSON object"],
    [{ ok: "yes" }, "malformed response from the agent: ok"],
    [{ exit: 0 }, "malformed response from the agent: ok"],
    [{ ok: true, exit: 1.5 }, "malformed response from the agent: exit"],
    [{ ok: true, stdout_b64: "abc" }, "malformed response from the agent: stdout_b64"],
    [{ ok: true, replay: false, position: 1 }, "malformed response from the agent: idempotency_key"],
    [{ ok: true, replay: false, idempotency_key: "k" }, "malformed response from the agent: position"],
    ["close", "the agent closed the connection without answering"],
  ];
  for (const [answer, message] of cases) {
    peer.answer = () => answer;
    const r = await runClient(client, peer, ["step", "a", "--", "echo", "never"]);
    assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [1, "", `error: ${message}\n`], JSON.stringify(answer));
  }
});

/** A copy of the Node fallback's dist beside a fake user CLI, and a native client pointing at it. */
const userCliTree = (withCli: boolean): { node: Client; native?: Client; cli: string } => {
  const tree = scratchPath("tree");
  for (const part of ["bin", "client"])
    cpSync(join(repoRoot, "agent-image", "dist", part), join(tree, "agent-image", "dist", part), { recursive: true });
  const cli = join(tree, "cli", "dist", "bin", "flow.js");
  if (withCli) {
    mkdirSync(join(tree, "cli", "dist", "bin"), { recursive: true });
    writeFileSync(cli, "process.stdout.write(JSON.stringify(process.argv.slice(1)) + '\\n'); process.exitCode = 9;\n");
  }
  const node: Client = { name: "node", bin: join(tree, "flow-node") };
  writeFileSync(
    node.bin,
    `#!/bin/sh\nexec '${process.execPath}' '${join(tree, "agent-image", "dist", "bin", "flow-inscript.js")}' "$@"\n`,
    { mode: 0o755 },
  );
  if (clients.length < 2) return { node, cli };
  const native: Client = { name: "native", bin: join(tree, "flow-native") };
  const source = join(repoRoot, "agent-image", "native", "flow.c");
  const cc = spawnSync("cc", [
    "-std=c11",
    "-O2",
    `-DFLOW_NODE=${JSON.stringify(process.execPath)}`,
    `-DFLOW_USER_CLI=${JSON.stringify(cli)}`,
    "-o",
    native.bin,
    source,
  ]);
  assert.equal(cc.status, 0, cc.stderr?.toString());
  return { node, native, cli };
};

void test("commands that are not in-script go to the user CLI with their arguments", async () => {
  const { node, native, cli } = userCliTree(true);
  for (const client of native ? [native, node] : [node]) {
    for (const args of [["submit", "f.sh", "--follow"], ["events", "ls"], []]) {
      const r = await run(client.bin, args, { env: { FLOW_AGENT_SOCKET: "/nowhere" } });
      assert.deepEqual(
        [r.code, r.stdout.toString(), r.stderr],
        [9, `${JSON.stringify([cli, ...args])}\n`, ""],
        `${client.name} ${args.join(" ")}`,
      );
    }
  }
});

void test("emit is the user CLI's outside a script, and the in-script client's inside one and in a step body", async () => {
  const { node, native, cli } = userCliTree(true);
  const args = ["emit", "deploy.done", "--payload", "{}"];
  for (const client of native ? [native, node] : [node]) {
    const outside: Array<Record<string, string>> = [{}, { FLOW_AGENT_SOCKET: "", FLOW_IDEMPOTENCY_KEY: "" }];
    for (const env of outside) {
      const r = await run(client.bin, args, { env });
      assert.deepEqual(
        [r.code, r.stdout.toString(), r.stderr],
        [9, `${JSON.stringify([cli, ...args])}\n`, ""],
        `${client.name} ${JSON.stringify(env)}`,
      );
    }
    const inScript = await run(client.bin, args, { env: { FLOW_AGENT_SOCKET: "/nowhere" } });
    assert.deepEqual(
      [inScript.code, inScript.stderr],
      [1, "error: cannot connect to the agent at /nowhere: No such file or directory\n"],
      client.name,
    );
    const stepBody = await run(client.bin, args, { env: { FLOW_IDEMPOTENCY_KEY: "k" } });
    assert.deepEqual([stepBody.code, stepBody.stdout.toString(), stepBody.stderr], [1, "", NOT_SET("emit")], client.name);
    const help = await run(client.bin, ["emit", "--help"], { env: { FLOW_AGENT_SOCKET: "/nowhere" } });
    assert.match(help.stdout.toString(), /^usage: flow emit <type> \[--key <subject>\] \[--payload <json>\]\n/, client.name);
  }
});

void test("a missing user CLI is reported with what to do", async () => {
  const { node, native, cli } = userCliTree(false);
  for (const client of native ? [native, node] : [node]) {
    const r = await run(client.bin, ["submit", "f.sh"]);
    assert.deepEqual(
      [r.code, r.stderr],
      [1, `error: the flow user CLI is not built (${cli} is missing)\nrun \`npm run build\` in the flowsvc repository\n`],
      client.name,
    );
  }
});

void test("IN_SCRIPT_COMMANDS lists the in-script commands; of them only emit is a user command too", () => {
  assert.deepEqual([...IN_SCRIPT_COMMANDS].sort(), [
    "activity",
    "activity-collect",
    "activity-submit",
    "activity-wait-all",
    "annotate",
    "call",
    "emit",
    "lock",
    "output",
    "sleep",
    "spawn",
    "state",
    "step",
    "wait-event",
    "wait-signal",
  ]);
  assert.deepEqual(SHARED_COMMANDS, ["emit"]);
  assert.equal(runsInScript("emit", {}), false);
  assert.equal(runsInScript("emit", { FLOW_AGENT_SOCKET: "/s" }), true);
  assert.equal(runsInScript("emit", { FLOW_IDEMPOTENCY_KEY: "k" }), true);
  assert.equal(runsInScript("wait-event", {}), true);
  assert.equal(runsInScript("submit", { FLOW_AGENT_SOCKET: "/s" }), false);
});

void test("runInScriptCommand returns the exit status instead of exiting", async () => {
  assert.equal(await runInScriptCommand(["step", "a", "--", "true"], {}), 1);
  assert.equal(await runInScriptCommand(["submit"], { FLOW_AGENT_SOCKET: "/nowhere" }), 2);
});

void test("a call that needs protocol v2 is refused at the call site by an older agent", async () => {
  const peer = await ProtocolPeer.start(scratchPath("old.sock"));
  peer.answer = (req) => (req.op === "hello" ? { v: 1, ok: true, protocol: 1 } : undefined);
  const connection = await AgentConnection.open(peer.path);
  try {
    await assert.rejects(connection.call({ id: 1, op: "wait-signal", name: "go", timeout: "1s" }, 2), (err: unknown) => {
      assert.ok(err instanceof ClientError);
      assert.deepEqual(err.lines, [
        "error: the agent speaks socket protocol v1; this call needs v2",
        "upgrade the flowsvc agent, or drop --timeout",
      ]);
      return true;
    });
    assert.deepEqual(
      peer.requests.map((r) => r.op),
      ["hello"],
      "the wait itself was never sent",
    );
  } finally {
    connection.close();
    await peer.close();
  }
});
