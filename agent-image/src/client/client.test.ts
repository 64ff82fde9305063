/**
 * `flow step` on both in-script clients (native and Node fallback) against a protocol peer:
 * exit codes, stdout bytes, the step body's env, the 2 MiB record limit, replay and its
 * suppression on the capture pipe. Other commands and errors: client-commands.test.ts.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, realpathSync, statSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { b64, forBoth, nativeBuilt, runClient, runShell, scratchPath } from "./client-test-kit.js";

const LIMIT = 2 * 1024 * 1024;
const everyByte = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

const dataFile = (name: string, bytes: Buffer): string => {
  const path = scratchPath(name);
  writeFileSync(path, bytes);
  return path;
};

void test("the native client is built here", { skip: nativeBuilt ? false : "no C compiler: only the Node fallback is tested" }, () => {
  assert.ok(nativeBuilt);
});

forBoth("a new step runs its command once, echoes its stdout and exits with its code", async (client, peer) => {
  const r = await runClient(client, peer, [
    "step",
    "build",
    "--label",
    "Build it",
    "--",
    "sh",
    "-c",
    "printf 'hello\\n'; echo oops >&2; exit 3",
  ]);
  assert.equal(r.code, 3);
  assert.equal(r.stdout.toString(), "hello\n");
  assert.equal(r.stderr, "oops\n");
  assert.deepEqual(peer.requests, [
    { v: 2, id: 1, op: "step", name: "build", label: "Build it" },
    { v: 2, id: 2, op: "step.complete", position: 1, stdout_b64: b64("hello\n"), exit: 3 },
  ]);
});

const cwd = scratchPath("cwd");
mkdirSync(cwd);
forBoth("the step body gets the script's env without FLOW_* plus FLOW_IDEMPOTENCY_KEY, in the same cwd", async (client, peer) => {
  const r = await runClient(client, peer, ["step", "env", "--", "sh", "-c", 'env; echo "cwd=$(pwd -P)"'], {
    cwd,
    extraEnv: { FLOW_INPUT_FILE: "/tmp/x", FLOW_IDEMPOTENCY_KEY: "stale" },
  });
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.toString().trim().split("\n");
  assert.deepEqual(
    lines.filter((l) => l.startsWith("FLOW_")),
    ["FLOW_IDEMPOTENCY_KEY=idem-1"],
  );
  assert.ok(lines.includes("KEEP_ME=kept"));
  assert.ok(lines.includes(`cwd=${realpathSync(cwd)}`));
});

const blob = Buffer.concat([everyByte, randomBytes(300 * 1024), everyByte]);
const blobFile = dataFile("blob", blob);
forBoth("binary and large stdout pass through byte for byte and are recorded", async (client, peer) => {
  const [bytes, file] = [blob, blobFile];
  const r = await runClient(client, peer, ["step", "blob", "--", "cat", file]);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.stdout.equals(bytes), "stdout is the command's bytes");
  assert.ok(peer.recorded.get("blob")?.stdout.equals(bytes), "the record is the command's bytes");
});

const big = randomBytes(LIMIT + 1000);
const bigFile = dataFile("big", big);
forBoth("output past 2 MiB is echoed in full, recorded up to 2 MiB and refused with how far over", async (client, peer) => {
  const [bytes, file] = [big, bigFile];
  const r = await runClient(client, peer, ["step", "big", "--", "cat", file]);
  assert.equal(r.code, 1);
  assert.ok(r.stdout.equals(bytes), "the whole output still reaches stdout");
  const complete = peer.requests[1] as { stdout_b64: string; overflow_bytes: number; exit: number };
  assert.ok(Buffer.from(complete.stdout_b64, "base64").equals(bytes.subarray(0, LIMIT)));
  assert.equal(complete.overflow_bytes, LIMIT + 1000);
  assert.equal(complete.exit, 0);
  assert.equal(r.stderr, `error: step output is ${LIMIT + 1000} bytes, 1000 bytes over the 2 MiB limit\n`);
});

const edge = big.subarray(0, LIMIT);
const edgeFile = dataFile("edge", edge);
forBoth("output of exactly 2 MiB is recorded whole, with no overflow", async (client, peer) => {
  const bytes = edge;
  const r = await runClient(client, peer, ["step", "edge", "--", "cat", edgeFile]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal("overflow_bytes" in (peer.requests[1] ?? {}), false);
  assert.ok(peer.recorded.get("edge")?.stdout.equals(bytes));
});

forBoth("a replayed step prints the record and exits with its code without running the command", async (client, peer) => {
  const marker = scratchPath("ran");
  peer.recorded.set("build", { stdout: everyByte, exit: 5 });
  const r = await runClient(client, peer, ["step", "build", "--", "touch", marker]);
  assert.equal(r.code, 5);
  assert.ok(r.stdout.equals(everyByte));
  assert.equal(existsSync(marker), false, "the command did not run");
  assert.equal(peer.requests.length, 1);
});

forBoth("a replayed step writes nothing when stdout is the agent's capture pipe, a new one echoes", async (client, peer) => {
  const fifo = scratchPath("capture");
  const log = scratchPath("log");
  assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
  peer.captureIno = statSync(fifo).ino;
  peer.recorded.set("old", { stdout: Buffer.from("recorded\n"), exit: 0 });
  // Like the agent's capture pipe: one FIFO is the whole script's stdout.
  const script =
    'cat "$FIFO" > "$LOG" & ("$CLIENT" step old -- false; a=$?; "$CLIENT" step new -- echo fresh; exit $((a * 10 + $?))) > "$FIFO"; c=$?; wait; exit $c';
  const r = await runShell(client, peer, script, { FIFO: fifo, LOG: log });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(readFileSync(log, "utf8"), "fresh\n");
});

forBoth("a replayed step prints the record when its stdout is a $(...) substitution or a file", async (client, peer) => {
  const fifo = scratchPath("capture");
  const file = scratchPath("out");
  assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
  writeFileSync(file, "");
  peer.recorded.set("old", { stdout: Buffer.from("recorded"), exit: 4 });
  peer.captureIno = statSync(fifo).ino;
  let r = await runShell(client, peer, 'x=$("$CLIENT" step old -- false); c=$?; printf "[%s]" "$x"; exit $c');
  assert.equal(r.code, 4);
  assert.equal(r.stdout.toString(), "[recorded]");
  peer.captureIno = statSync(file).ino; // same inode, but a regular file is never the capture pipe
  r = await runShell(client, peer, '"$CLIENT" step old -- false > "$OUT"', { OUT: file });
  assert.equal(r.code, 4);
  assert.equal(readFileSync(file, "utf8"), "recorded");
});

forBoth("a recorded failure replays its message on stderr and its exit code", async (client, peer) => {
  peer.recorded.set("big", { stdout: Buffer.alloc(0), exit: 1, error: "step output is 3000000 bytes, 902848 bytes over the 2 MiB limit" });
  const r = await runClient(client, peer, ["step", "big", "--", "true"]);
  assert.equal(r.code, 1);
  assert.equal(r.stdout.length, 0);
  assert.equal(r.stderr, "error: step output is 3000000 bytes, 902848 bytes over the 2 MiB limit\n");
});

forBoth("a command killed by a signal records 128+n", async (client, peer) => {
  const r = await runClient(client, peer, ["step", "killed", "--", "sh", "-c", "echo before; kill -TERM $$"]);
  assert.equal(r.code, 143);
  assert.equal(r.stdout.toString(), "before\n");
  assert.equal((peer.requests[1] as { exit: number }).exit, 143);
});

forBoth("a command that cannot be run records 127 (126 when not executable) and says so like a shell", async (client, peer) => {
  const plain = dataFile("plain", Buffer.from("not a program"));
  chmodSync(plain, 0o644);
  const cases: Array<[string, number, string]> = [
    ["no-such-command-xyz", 127, "flow step: no-such-command-xyz: command not found\n"],
    ["./no/such/file", 127, "flow step: ./no/such/file: No such file or directory\n"],
    [plain, 126, `flow step: ${plain}: Permission denied\n`],
  ];
  for (const [i, [cmd, code, message]] of cases.entries()) {
    const r = await runClient(client, peer, ["step", `s${i}`, "--", cmd, "arg"]);
    assert.equal(r.code, code, cmd);
    assert.equal(r.stderr, message);
    assert.equal(peer.recorded.get(`s${i}`)?.exit, code);
  }
});

// One place for both clients: the wire (which holds the path) must be the same.
const noShebang = scratchPath("no-shebang");
mkdirSync(noShebang);
writeFileSync(`${noShebang}/greet`, 'echo "hi $1 from $0"\n');
chmodSync(`${noShebang}/greet`, 0o755);
forBoth("a program without a #! line runs with /bin/sh, by path and by name on PATH, as a shell would run it", async (client, peer) => {
  const dir = noShebang;
  const byPath = await runClient(client, peer, ["step", "by-path", "--", `${dir}/greet`, "you"]);
  assert.equal(byPath.code, 0, byPath.stderr);
  assert.equal(byPath.stdout.toString(), `hi you from ${dir}/greet\n`);
  const byName = await runShell(client, peer, `PATH="${dir}:$PATH" "$CLIENT" step by-name -- greet "a b"`);
  assert.equal(byName.code, 0, byName.stderr);
  assert.equal(byName.stdout.toString(), `hi a b from ${dir}/greet\n`);
});

forBoth("the record survives a reader that closes stdout early", async (client, peer) => {
  const r = await runShell(client, peer, '"$CLIENT" step many -- sh -c "yes | head -c 1000000" | head -c 4');
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.toString(), "y\ny\n");
  assert.equal(peer.recorded.get("many")?.stdout.length, 1000000);
  assert.equal(peer.recorded.get("many")?.exit, 0);
});

forBoth("a step run with stdout closed, or all three standard streams, records its body and exits with its code", async (client, peer) => {
  // With fd 1 closed, the agent connection would be given fd 1 and the echo of the body's output
  // would be written into it; the client keeps the standard descriptors taken (/dev/null) instead.
  const script = [
    'timeout 10 "$CLIENT" step out -- sh -c "echo hi; exit 3" >&-; echo "rc=$?"',
    'timeout 10 "$CLIENT" step all -- sh -c "echo all; exit 4" <&- >&- 2>&-; echo "rc=$?"',
  ].join("\n");
  const r = await runShell(client, peer, script);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [0, "rc=3\nrc=4\n", ""]);
  assert.deepEqual([peer.recorded.get("out")?.stdout.toString(), peer.recorded.get("out")?.exit], ["hi\n", 3]);
  assert.deepEqual([peer.recorded.get("all")?.stdout.toString(), peer.recorded.get("all")?.exit], ["all\n", 4]);
});

forBoth("the step's stdin is the script's stdin", async (client, peer) => {
  const r = await runClient(client, peer, ["step", "tr", "--", "tr", "a-z", "A-Z"], { stdin: "shout\n" });
  assert.equal(r.stdout.toString(), "SHOUT\n");
  assert.equal(peer.recorded.get("tr")?.stdout.toString(), "SHOUT\n");
});

forBoth("a refused step prints the agent's message and exits with its exit (default 1)", async (client, peer) => {
  const message = 'replay reached step "b" at call #0, but the journal recorded step "a" there';
  peer.answer = (req) => (req.op === "step" ? { ok: false, error: { code: "determinism", message }, exit: 3 } : undefined);
  let r = await runClient(client, peer, ["step", "b", "--", "true"]);
  assert.deepEqual([r.code, r.stderr], [3, `error: ${message}\n`]);
  peer.answer = (req) => (req.op === "step" ? { ok: false, error: { code: "internal", message: "boom" } } : undefined);
  r = await runClient(client, peer, ["step", "b", "--", "true"]);
  assert.deepEqual([r.code, r.stderr], [1, "error: boom\n"]);
});

forBoth("a refused step.complete exits with the agent's exit after the output was echoed", async (client, peer) => {
  peer.answer = (req) =>
    req.op === "step.complete" ? { ok: false, error: { code: "job_lost", message: "the job's lease was taken over" }, exit: 4 } : undefined;
  const r = await runClient(client, peer, ["step", "x", "--", "echo", "hi"]);
  assert.deepEqual([r.code, r.stdout.toString(), r.stderr], [4, "hi\n", "error: the job's lease was taken over\n"]);
});

forBoth("a flow call nested in a step body fails with FLOW_AGENT_SOCKET is not set", async (client, peer) => {
  const r = await runClient(client, peer, ["step", "outer", "--", client.bin, "step", "inner", "--", "true"]);
  assert.equal(r.code, 1);
  assert.equal(
    r.stderr,
    "error: FLOW_AGENT_SOCKET is not set\nflow step works only inside a script run by flowsvc (flow submit / flow run)\n",
  );
  assert.equal(peer.recorded.get("outer")?.exit, 1);
});
