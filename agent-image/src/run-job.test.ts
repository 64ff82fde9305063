import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { FlowError } from "@flowsvc/core";
import type { ActivityClaim, LogChunk } from "@flowsvc/core";
import { doneCall, fakeBackend, pendingCall, scriptClaim } from "./agent-test-kit.js";
import type { AgentBackend } from "./backend.js";
import { createLogger, silentLogger } from "./logger.js";
import { runJob } from "./run-job.js";
import type { JobOptions } from "./run-job.js";

let dir: string;
before(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), "fa-job-")));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A one-request socket client in the script (the real in-script clients are tested on their own). */
const CLIENT = `node -e 'const s=require("net").createConnection(process.env.FLOW_AGENT_SOCKET);s.write(process.argv[1]+"\\n");let t="";s.on("data",(d)=>{t+=d;if(!t.includes("\\n"))return;const r=JSON.parse(t);if(r.stdout_b64)process.stdout.write(Buffer.from(r.stdout_b64,"base64"));if(r.stderr)process.stderr.write(r.stderr);process.exit(r.exit??(r.ok?0:1))})'`;
const callOf = (request: object): string => `${CLIENT} '${JSON.stringify({ v: 2, ...request })}'`;

const options = (fields: Partial<JobOptions> = {}): JobOptions => ({
  agentId: "agt-test",
  capabilities: [],
  workdir: dir,
  clientDir: undefined,
  agentEnv: { PATH: `${dirname(process.execPath)}:/usr/bin:/bin`, HOME: dir, FLOW_JOB_TOKEN: "must-not-leak" },
  logger: silentLogger,
  stop: new AbortController().signal,
  agentPid: process.pid,
  timings: { killGraceMs: 500, drainMs: 200, logIntervalMs: 10 },
  ...fields,
});

const logText = (backend: ReturnType<typeof fakeBackend>, stream?: LogChunk["stream"]): string =>
  backend.calls
    .filter(([m]) => m === "log")
    .flatMap(([, chunks]) => chunks as LogChunk[])
    .filter((c) => !stream || c.stream === stream)
    .map((c) => c.data)
    .join("");

const methods = (backend: ReturnType<typeof fakeBackend>): string[] =>
  backend.calls.map(([m]) => m).filter((m) => m !== "log" && m !== "heartbeat");

void test("a pending call ends the script, ships its log and suspends the job without a finish", async () => {
  const source = `echo before\n${callOf({ op: "sleep", duration: "1h" })}\necho after\n`;
  const backend = fakeBackend({
    claim: () => Promise.resolve(scriptClaim({ source })),
    call: (body) => Promise.resolve(pendingCall(body, { name: "timer", kind: "sleep" })),
    suspend: () => Promise.resolve("parked"),
  });
  const started = Date.now();
  const outcome = await runJob(backend, options());
  assert.deepEqual(outcome, { type: "suspended", status: "parked" });
  assert.ok(Date.now() - started < 10_000, "the waiting client was ended, not waited for");
  assert.equal(logText(backend), "before\n");
  assert.deepEqual(methods(backend), ["claim", "call", "suspend", "close"]);
  const suspendAt = backend.calls.findIndex(([m]) => m === "suspend");
  assert.ok(backend.calls.findLastIndex(([m]) => m === "log") < suspendAt, "the log was shipped before the suspension");
});

void test("a call answered done returns to the script, which runs on and finishes", async () => {
  const source = `v=$(${callOf({ op: "wait-signal", name: "go" })})\necho "got $v"\n`;
  const backend = fakeBackend({
    claim: () => Promise.resolve(scriptClaim({ source })),
    call: (body) => Promise.resolve(doneCall(body, { payload: { x: 1 } })),
    finish: () => Promise.resolve("succeeded"),
  });
  const outcome = await runJob(backend, options());
  assert.deepEqual(outcome, { type: "finished", exitCode: 0, status: "succeeded" });
  assert.equal(logText(backend, "stdout"), 'got {"x":1}\n');
  assert.deepEqual(methods(backend), ["claim", "call", "finish", "close"]);
});

void test("a script's last output goes with its finish, one request; a refused finish ships it alone and fails the job saying why", async () => {
  const bodies: unknown[] = [];
  const backend = fakeBackend({
    claim: () => Promise.resolve(scriptClaim({ source: "echo hi\necho oops >&2\n" })),
    finish: (body) => (bodies.push(body), Promise.resolve("succeeded")),
  });
  assert.deepEqual(await runJob(backend, options({ timings: { logIntervalMs: 60_000 } })), {
    type: "finished",
    exitCode: 0,
    status: "succeeded",
  });
  assert.equal(bodies.length, 1);
  assert.deepEqual((bodies[0] as { log?: LogChunk[] }).log, [
    { stream: "stdout", data: "hi\n" },
    { stream: "stderr", data: "oops\n" },
  ]);
  assert.ok(!backend.calls.some(([m], i) => m === "log" && backend.calls[i + 1]?.[0] !== "finish"), "no log request of its own");

  const refused: Array<[string, unknown]> = [];
  const strict = fakeBackend({
    claim: () => Promise.resolve(scriptClaim({ source: "echo kept\n" })),
    log: (chunks) => (refused.push(["log", chunks]), Promise.resolve()),
    finish: (body) => {
      refused.push(["finish", body]);
      return refused.length === 1
        ? Promise.reject(new FlowError("payload_too_large", "the body is over its limit"))
        : Promise.resolve("failed");
    },
  });
  assert.deepEqual(await runJob(strict, options({ timings: { logIntervalMs: 60_000 } })), {
    type: "finished",
    exitCode: 0,
    status: "failed",
  });
  assert.deepEqual(
    refused.map(([m]) => m),
    ["finish", "log", "finish"],
  );
  assert.deepEqual(refused[1], ["log", [{ stream: "stdout", data: "kept\n" }]]);
  const last = refused[2]![1] as { error?: string; log?: unknown };
  assert.match(last.error ?? "", /the server refused the job's result: the body is over its limit/);
  assert.equal(last.log, undefined);
});

void test("FLOW_INPUT_FILE holds the claim's input (a handler run's envelope) when it has one, the trigger's envelope otherwise", async () => {
  const input = { type: "deploy.done", event: "evt-1", key: "acme/web", payload: { v: 2 } };
  for (const [fields, expected] of [
    [{ input, trigger: { type: "deploy.done", event: "evt-1" } }, input],
    [{ trigger: { type: "spawn", parent: "run-p" } }, { type: "spawn", event: null, payload: null, parent: "run-p" }],
  ] as const) {
    const backend = fakeBackend({
      claim: () => Promise.resolve(scriptClaim({ source: 'cat "$FLOW_INPUT_FILE"\n', ...fields })),
      finish: () => Promise.resolve("succeeded"),
    });
    assert.equal((await runJob(backend, options())).type, "finished");
    assert.deepEqual(JSON.parse(logText(backend, "stdout")), expected);
  }
});

void test("the script can run in place: a given file, in a given working directory", async () => {
  const cwd = await mkdtemp(join(dir, "cwd-"));
  const scriptPath = join(cwd, "in-place.sh");
  await writeFile(scriptPath, 'echo "dir=$(pwd) file=$(basename "$0")"\n');
  const backend = fakeBackend({
    claim: () => Promise.resolve(scriptClaim({ source: "echo not this one\n", filename: "in-place.sh" })),
    finish: () => Promise.resolve("succeeded"),
  });
  const outcome = await runJob(backend, options({ cwd, scriptPath }));
  assert.equal(outcome.type, "finished");
  assert.equal(logText(backend, "stdout"), `dir=${cwd} file=in-place.sh\n`);
});

void test("a stop while claiming closes the backend and ends the job as stopped", async () => {
  const stop = new AbortController();
  let rejectClaim: (err: Error) => void = () => undefined;
  const backend = fakeBackend({
    claim: () => {
      queueMicrotask(() => stop.abort()); // the stop comes while the claim is under way
      return new Promise((_, reject) => (rejectClaim = reject));
    },
    close: () => {
      rejectClaim(new FlowError("unavailable", "closed"));
      return Promise.resolve();
    },
  });
  assert.deepEqual(await runJob(backend, options({ stop: stop.signal })), { type: "stopped" });
  assert.ok(methods(backend).includes("close"));
});

const activityClaim = (argv: string[], fields: Partial<ActivityClaim> = {}): ActivityClaim => ({
  kind: "activity",
  job_id: "job-act",
  run_id: "run-test",
  activity_id: "act-1",
  name: "build",
  project: "prj-test",
  attempt: 1,
  argv,
  env: {},
  masks: [],
  lease_ms: 60_000,
  ...fields,
});

const runActivity = async (claim: ActivityClaim, extra: Partial<AgentBackend> = {}) => {
  const backend = fakeBackend({ claim: () => Promise.resolve(claim), finishActivity: () => Promise.resolve("succeeded"), ...extra });
  const outcome = await runJob(backend, options());
  const finish = backend.calls.find(([m]) => m === "finishActivity")?.[1] as
    { exit_code: number; stdout_b64: string; error?: string } | undefined;
  return { backend, outcome, finish };
};

void test("an activity runs in the agent's working directory with a sealed env; stdout is returned, stderr masked into the log", async () => {
  const script = 'pwd; env | grep "^FLOW_" || echo no-flow-vars; echo "key=$DEPLOY_KEY"; echo "err hunter2" >&2; exit 3';
  const { backend, outcome, finish } = await runActivity(
    activityClaim(["sh", "-c", script], { env: { DEPLOY_KEY: "hunter2", FLOW_X: "y" }, masks: ["hunter2"] }),
  );
  assert.deepEqual(outcome, { type: "finished", exitCode: 3, status: "succeeded" });
  assert.equal(finish?.exit_code, 3);
  assert.equal(Buffer.from(finish?.stdout_b64 ?? "", "base64").toString(), `${dir}\nno-flow-vars\nkey=hunter2\n`);
  assert.equal(logText(backend, "stderr"), "err ***\n");
  assert.ok(!logText(backend).includes("hunter2"));
  assert.equal(logText(backend, "stdout"), "", "an activity's stdout goes to its collector, not to the log");
});

void test("an activity whose command cannot start ends with 127 and says why", async () => {
  const { outcome, finish, backend } = await runActivity(activityClaim(["no-such-command-xyz", "--flag"]));
  assert.deepEqual(outcome, { type: "finished", exitCode: 127, status: "succeeded" });
  assert.match(finish?.error ?? "", /cannot start "no-such-command-xyz"/);
  assert.match(logText(backend, "system"), /error: activity build: cannot start "no-such-command-xyz"/);
});

void test("an activity whose stdout is over 2 MiB fails with how far over", async () => {
  const { finish } = await runActivity(activityClaim(["head", "-c", "2200000", "/dev/zero"]));
  assert.deepEqual(finish && [finish.exit_code, finish.stdout_b64, finish.error], [
    1,
    "",
    "step output is 2200000 bytes, 102848 bytes over the 2 MiB limit",
  ]);
});

void test("an activity whose lease is lost is ended and not finished", async () => {
  const { outcome, backend } = await runActivity(activityClaim(["sleep", "30"], { lease_ms: 300 }), {
    heartbeat: () => Promise.reject(new FlowError("job_lost", "the job's lease is gone")),
  });
  assert.deepEqual(outcome, { type: "lost" });
  assert.ok(!methods(backend).includes("finishActivity"));
});

void test("a variable with a NUL byte fails the job as a start error naming the variable; no log, line or finish carries the value", async () => {
  const env = { DEPLOY_KEY: "hunter2\u0000qz7tail" };
  const lines: string[] = [];
  const logger = createLogger((line) => lines.push(line), {}, "debug");
  const script = fakeBackend({
    claim: () => Promise.resolve(scriptClaim({ source: "echo ran\n", env, masks: [] })),
    finish: () => Promise.resolve("failed"),
  });
  assert.deepEqual(await runJob(script, options({ logger })), { type: "finished", exitCode: 127, status: "failed" });
  const finish = script.calls.find(([m]) => m === "finish")?.[1] as { exit_code: number; error?: string };
  assert.equal(finish.exit_code, 127);
  assert.match(finish.error ?? "", /environment variable "DEPLOY_KEY" holds a NUL byte, which a process environment cannot hold/);
  assert.match(logText(script, "system"), /^error: cannot start "bash": environment variable "DEPLOY_KEY" holds a NUL byte/);
  const activity = await runActivity(activityClaim(["sh", "-c", "echo ran"], { env }), {});
  assert.equal(activity.finish?.exit_code, 127);
  assert.match(
    logText(activity.backend, "system"),
    /error: activity build: cannot start "sh": environment variable "DEPLOY_KEY" holds a NUL byte/,
  );
  const everything = JSON.stringify([script.calls, activity.backend.calls, lines]);
  for (const part of ["hunter2", "qz7tail"]) assert.ok(!everything.includes(part), `the value reached a log or a call: ${part}`);
  assert.ok(lines.length > 0, "the logger saw the job");
});
