/**
 * `flow output set`, `flow annotate`, usage and protocol errors, and the hand-off of other
 * commands to the user CLI, on both in-script clients. `flow step`: client.test.ts; sleep,
 * wait-signal, lock: client-waits.test.ts; activity*, spawn, state: client-fanout.test.ts.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, cpSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
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

let nativeBin: string | undefined;
/** flow.c compiled once, with no -D at all: nothing about its location is baked in. */
const nativeBuild = (): string => {
  if (nativeBin) return nativeBin;
  const out = scratchPath("flow-native");
  const cc = spawnSync("cc", ["-std=c11", "-O2", "-o", out, join(repoRoot, "agent-image", "native", "flow.c")]);
  assert.equal(cc.status, 0, cc.stderr?.toString());
  return (nativeBin = out);
};

/**
 * A copy of the agent's in-script clients laid out as in the image (<tree>/agent-image/bin/flow,
 * bin-node/flow, dist/), and a directory holding a fake user CLI named `flow`. No cli/ anywhere:
 * the clients find the user CLI on PATH (skipping themselves) or in FLOW_USER_CLI.
 */
const userCliTree = (): { clients: Client[]; cliDir: string; cli: string; path: (...dirs: string[]) => string } => {
  const tree = join(scratchPath("tree"), "agent-image");
  for (const part of ["bin", "client"]) cpSync(join(repoRoot, "agent-image", "dist", part), join(tree, "dist", part), { recursive: true });
  cpSync(join(repoRoot, "agent-image", "bin-node"), join(tree, "bin-node"), { recursive: true });
  const node: Client = { name: "node", bin: join(tree, "bin-node", "flow") };
  const cliDir = scratchPath("user-cli");
  mkdirSync(cliDir);
  const cli = join(cliDir, "flow");
  writeFileSync(cli, '#!/bin/sh\nprintf \'%s\\n\' "$0" "$@"\nexit 9\n', { mode: 0o755 });
  const path = (...dirs: string[]): string => [...dirs, "/usr/local/bin:/usr/bin:/bin"].join(":");
  if (clients.length < 2) return { clients: [node], cliDir, cli, path };
  mkdirSync(join(tree, "bin"));
  const native: Client = { name: "native", bin: join(tree, "bin", "flow") };
  copyFileSync(nativeBuild(), native.bin);
  return { clients: [native, node], cliDir, cli, path };
};

const NO_USER_CLI =
  "error: the flow user CLI is not installed here: no flow on PATH but the in-script client, and FLOW_USER_CLI is not set\n" +
  "put the flow CLI on PATH or set FLOW_USER_CLI to its path; in-script commands (flow step, flow sleep, ...) work without it\n";

const lines = (...words: string[]): string => words.map((w) => `${w}\n`).join("");

void test("commands that are not in-script go to the first user CLI on PATH with their arguments, skipping the in-script clients", async () => {
  const { clients: both, cliDir, cli, path } = userCliTree();
  for (const client of both) {
    // the in-script clients' own directories come first on PATH, as in a script's environment
    const PATH = path(dirname(both[0]!.bin), dirname(client.bin), cliDir);
    for (const args of [["submit", "f.sh", "--follow"], ["events", "ls"], []]) {
      const r = await run(client.bin, args, { env: { PATH, FLOW_AGENT_SOCKET: "/nowhere" } });
      assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [9, lines(cli, ...args), ""], `${client.name} ${args.join(" ")}`);
    }
  }
});

void test("FLOW_USER_CLI names the user CLI; a JavaScript CLI is run too; one that is not executable is refused", async () => {
  const { clients: both, cliDir, cli } = userCliTree();
  const js = join(cliDir, "flow.js");
  writeFileSync(js, "#!/usr/bin/env node\nprocess.stdout.write(JSON.stringify(process.argv.slice(2)) + '\\n'); process.exitCode = 7;\n", {
    mode: 0o755,
  });
  const plain = join(cliDir, "not-executable");
  writeFileSync(plain, "#!/bin/sh\nexit 0\n", { mode: 0o644 });
  for (const client of both) {
    const given = await run(client.bin, ["secret", "ls"], { env: { FLOW_USER_CLI: cli } });
    assert.deepEqual([given.code, given.stdout.toString(), given.stderr], [9, lines(cli, "secret", "ls"), ""], client.name);
    const javascript = await run(client.bin, ["status", "run-1", "é\u2028"], { env: { FLOW_USER_CLI: js } });
    assert.deepEqual(
      [javascript.code, javascript.stdout.toString(), javascript.stderr],
      [7, '["status","run-1","é\u2028"]\n', ""],
      client.name,
    );
    for (const bad of [plain, join(cliDir, "missing"), cliDir]) {
      const r = await run(client.bin, ["submit", "f.sh"], { env: { FLOW_USER_CLI: bad } });
      assert.deepEqual(
        [r.code, r.stdout.toString(), r.stderr],
        [1, "", `error: FLOW_USER_CLI=${bad} is not an executable file\n`],
        client.name,
      );
    }
  }
});

void test("emit is the user CLI's outside a script, and the in-script client's inside one and in a step body", async () => {
  const { clients: both, cliDir, cli, path } = userCliTree();
  const args = ["emit", "deploy.done", "--payload", "{}"];
  for (const client of both) {
    const PATH = path(dirname(client.bin), cliDir);
    const outside: Array<Record<string, string>> = [{ PATH }, { PATH, FLOW_AGENT_SOCKET: "", FLOW_IDEMPOTENCY_KEY: "" }];
    for (const env of outside) {
      const r = await run(client.bin, args, { env });
      assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [9, lines(cli, ...args), ""], `${client.name} ${JSON.stringify(env)}`);
    }
    const inScript = await run(client.bin, args, { env: { PATH, FLOW_AGENT_SOCKET: "/nowhere" } });
    assert.deepEqual(
      [inScript.code, inScript.stderr],
      [1, "error: cannot connect to the agent at /nowhere: No such file or directory\n"],
      client.name,
    );
    const stepBody = await run(client.bin, args, { env: { PATH, FLOW_IDEMPOTENCY_KEY: "k" } });
    assert.deepEqual([stepBody.code, stepBody.stdout.toString(), stepBody.stderr], [1, "", NOT_SET("emit")], client.name);
    const help = await run(client.bin, ["emit", "--help"], { env: { FLOW_AGENT_SOCKET: "/nowhere" } });
    assert.match(help.stdout.toString(), /^usage: flow emit <type> \[--key <subject>\] \[--payload <json>\]\n/, client.name);
  }
});

void test("with no user CLI (only the in-script clients on PATH, a relative entry, a directory named flow) the clients say what to do", async () => {
  const { clients: both, cliDir } = userCliTree();
  mkdirSync(join(cliDir, "sub", "flow"), { recursive: true }); // a directory is not a CLI
  for (const client of both) {
    // the cwd holds a user CLI: an empty or relative entry, which would find it, is never searched
    const PATH = [dirname(both[0]!.bin), dirname(client.bin), "", ".", join(cliDir, "sub"), "/usr/bin:/bin"].join(":");
    const r = await run(client.bin, ["submit", "f.sh"], { env: { PATH }, cwd: cliDir });
    assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [1, "", NO_USER_CLI], client.name);
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
