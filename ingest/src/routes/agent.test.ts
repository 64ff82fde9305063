/**
 * The agent API plugins (routes/agent.ts, agent-claim.ts, agent-calls.ts) over app.inject(): a
 * job's claim, heartbeat, journal, log, annotate, finish, its durable calls, and their refusals.
 * Jobs are queued through the user API and dispatched as the dispatcher does (store claimReadyJobs).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  TEST_LEASE_MS,
  ask,
  assertError,
  countRows,
  createTestApp,
  deepJson,
  dispatchJob,
  startScriptJob,
  type Answer,
  type TestApp,
  type TestJob,
} from "../testing/test-app.js";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(() => t.close());

const SECRET = "hunter2-agent-secret";

/** An agent request with the job's token (or none, or any other). */
const agent = (path: string, job: TestJob | { token: string } | "none", body?: unknown): Promise<Answer> =>
  ask(t, "POST", `/agent/v1/${path}`, { as: job === "none" ? "none" : { token: job.token }, body: body ?? {} });

const claim = (job: TestJob): Promise<Answer> => agent("claim", job, { agent_id: "agent-1" });

const runStatus = async (runId: string): Promise<string> =>
  ((await ask(t, "GET", `${t.project.base}/runs/${runId}`, { as: "viewer" })).body as { status: string }).status;

const step = (position: number, name: string, text = "hi") => ({
  position,
  kind: "step",
  name,
  ordinal: 0,
  result: { stdout_b64: Buffer.from(text).toString("base64"), exit: 0 },
});

/** A claimed script job whose run submitted an activity, and the activity's own job, dispatched. */
const activityJob = async (): Promise<{ script: TestJob; activity: TestJob }> => {
  const script = await startScriptJob(t);
  await claim(script);
  const submitted = await agent("call", script, {
    position: 0,
    kind: "activity-submit",
    name: "fan",
    ordinal: 0,
    args: { argv: ["echo", "out"] },
  });
  assert.equal(submitted.status, 200, submitted.text);
  return { script, activity: await dispatchJob(t, script.runId, "activity") };
};

test("a script job's life: claim (with the project's secrets), heartbeat, journal, log, annotate, finish", async () => {
  assert.equal((await ask(t, "PUT", `${t.project.base}/secrets/API_KEY`, { as: "admin", body: { value: SECRET } })).status, 200);
  const job = await startScriptJob(t, "echo hello\n");
  const claimed = await claim(job);
  assert.equal(claimed.status, 200, claimed.text);
  const c = claimed.body as {
    kind: string;
    run_id: string;
    source: string;
    env: Record<string, string>;
    masks: string[];
    journal: unknown[];
    lease_ms: number;
  };
  assert.deepEqual([c.kind, c.run_id, c.source, c.journal, c.lease_ms], ["script", job.runId, "echo hello\n", [], TEST_LEASE_MS]);
  assert.equal(c.env["API_KEY"], SECRET);
  assert.deepEqual(c.masks, [SECRET]);
  assert.equal(await runStatus(job.runId), "running");

  assert.deepEqual((await agent("heartbeat", job)).body, { lease_ms: TEST_LEASE_MS });
  const recorded = await agent("journal", job, step(0, "build", "built"));
  assert.equal(recorded.status, 200, recorded.text);
  assert.deepEqual((recorded.body as { entry: { result: unknown } }).entry.result, step(0, "build", "built").result);
  const replayed = await agent("journal", job, step(0, "build", "other output"));
  assert.deepEqual(
    (replayed.body as { entry: { result: unknown } }).entry.result,
    step(0, "build", "built").result,
    "a replay answers as recorded",
  );
  // The job is known now: the next records take the one-statement way, and answer what was sent.
  // A step that printed nothing is stored plain; one that printed is sealed.
  for (const [position, text] of [
    [1, ""],
    [2, `out ${SECRET}`],
  ] as const) {
    const next = await agent("journal", job, step(position, `s${position}`, text));
    assert.deepEqual((next.body as { entry: unknown }).entry, { ...step(position, `s${position}`, text), status: "done" });
  }
  const stored = await t.db.pool.query<{ position: number; result: unknown }>(
    `select position, result from journal where run_id = $1 and position > 0 order by position`,
    [job.runId],
  );
  assert.deepEqual(stored.rows[0], { position: 1, result: { stdout_b64: "", exit: 0 } });
  assert.match(String(stored.rows[1]?.result), /^flowsvc-sealed:1:/);

  assert.deepEqual((await agent("log", job, { chunks: [{ stream: "stdout", data: "hello\n" }] })).body, {});
  assert.equal((await ask(t, "GET", `${t.project.base}/runs/${job.runId}/log`, { as: "viewer" })).text, "hello\n");
  assert.deepEqual((await agent("annotate", job, { markdown: `key is ${SECRET}` })).body, {});

  const finished = await agent("finish", job, { exit_code: 0, outputs: { out: `x ${SECRET}` }, duration_ms: 5 });
  assert.deepEqual([finished.status, finished.body], [200, { status: "succeeded" }]);
  const view = (await ask(t, "GET", `${t.project.base}/runs/${job.runId}`, { as: "viewer" })).body as {
    status: string;
    output: Record<string, unknown>;
    annotations: Array<{ markdown: string }>;
  };
  assert.equal(view.status, "succeeded");
  assert.equal(view.output["out"], "x ***");
  assert.equal(view.annotations[0]?.markdown, "key is ***");
  assert.ok(!JSON.stringify(view).includes(SECRET), "the run never shows the secret");
  await ask(t, "DELETE", `${t.project.base}/secrets/API_KEY`, { as: "admin" });
});

test("a handler run's claim carries its event's whole envelope as input", async () => {
  const set = await ask(t, "PUT", `${t.project.base}/handlers/on-order`, {
    body: { on: ["order.*"], reaction: { kind: "script", source: 'cat "$FLOW_INPUT_FILE"\n', filename: "h.sh" } },
  });
  assert.equal(set.status, 201, set.text);
  const emitted = await ask(t, "POST", `${t.project.base}/events`, { body: { type: "order.created", key: "o-1", payload: { n: 5 } } });
  const { id: eventId, handler_runs: started } = emitted.body as {
    id: string;
    handler_runs: Array<{ run_id?: string; id?: string } | string>;
  };
  assert.equal(started.length, 1, emitted.text);
  const first = started[0]!;
  const runId = typeof first === "string" ? first : (first.run_id ?? first.id)!;
  const job = await dispatchJob(t, runId);
  const claimed = await claim(job);
  assert.equal(claimed.status, 200, claimed.text);
  const input = (claimed.body as { input: { event: string; type: string; key: string; payload: unknown } }).input;
  assert.deepEqual([input.event, input.type, input.key, input.payload], [eventId, "order.created", "o-1", { n: 5 }]);
  assert.deepEqual((await agent("finish", job, { exit_code: 0, duration_ms: 1 })).body, { status: "succeeded" });
  await ask(t, "DELETE", `${t.project.base}/handlers/on-order`);
});

test("a failing script: the run fails with the error, masked; the finish's last log batch is in the run's log", async () => {
  const job = await startScriptJob(t);
  await claim(job);
  assert.equal((await agent("log", job, { chunks: [{ stream: "stdout", data: "first\n" }] })).status, 200);
  const log = [
    { stream: "stdout", data: "last\n" },
    { stream: "stderr", data: "boom\n" },
  ];
  const finished = await agent("finish", job, { exit_code: 3, duration_ms: 1, log });
  assert.deepEqual(finished.body, { status: "failed" });
  const text = (await ask(t, "GET", `${t.project.base}/runs/${job.runId}/log`, { as: "viewer" })).text;
  assert.equal(text, "first\nlast\nboom\n");
  const view = (await ask(t, "GET", `${t.project.base}/runs/${job.runId}`, { as: "viewer" })).body as { status: string; error: string };
  assert.deepEqual([view.status, view.error], ["failed", "the script exited with code 3"]);
});

test("every agent route without a job token is a 401; a user's token is not one; a job token of no job is job_lost", async () => {
  const paths = ["claim", "heartbeat", "journal", "log", "annotate", "finish", "call", "suspend", "state", "finish-activity"];
  for (const path of paths) {
    assertError(
      await agent(path, "none"),
      401,
      /the agent API needs a job token \(Authorization: Bearer job_\.\.\.\); none was sent/,
      `${path} without a token`,
    );
    const user = await agent(path, { token: t.tokens.admin });
    assertError(user, 401, /the agent API needs a job token .*; this is not one/, `${path} with a user token`);
    assert.match(user.error?.hint ?? "", /\/agent\/v1 is for the agent running a job/);
    const forged = await agent(path, { token: `job_${"A".repeat(43)}` });
    assertError(forged, 409, /this job's lease is gone/, `${path} with a job token never minted`);
    assert.equal(forged.error?.code, "job_lost");
  }
});

test("a job token does not open the user API", async () => {
  const job = await startScriptJob(t);
  assertError(
    await ask(t, "GET", `${t.project.base}/runs`, { as: { token: job.token } }),
    401,
    /the API token is not valid for this server/,
  );
  await claim(job);
  await agent("finish", job, { exit_code: 0, duration_ms: 0 });
});

test("a finished job's token is lost: every route answers 409 job_lost and writes nothing", async () => {
  const job = await startScriptJob(t);
  await claim(job);
  // A step recorded first: the server has seen this token's job, and records its next step in one statement.
  await agent("journal", job, step(0, "build"));
  await agent("finish", job, { exit_code: 0, duration_ms: 0 });
  const journal = await countRows(t, "journal");
  const logs = await countRows(t, "run_logs");
  for (const [path, body] of [
    ["heartbeat", {}],
    ["claim", { agent_id: "late" }],
    ["journal", step(1, "late")],
    ["journal", step(0, "build")],
    ["journal", { position: "zero" }], // a body that does not parse: the lost job is told first
    ["log", { chunks: [] }],
    ["finish", { exit_code: 0, duration_ms: 0 }],
    ["finish", { exit_code: 0, duration_ms: 0, log: [{ stream: "stdout", data: "late\n" }] }],
  ] as const) {
    const res = await agent(path, job, body);
    assertError(res, 409, /this job's lease is gone: it finished, or it was dispatched again to another agent/, `${path} after finish`);
  }
  assert.equal(await countRows(t, "journal"), journal);
  assert.equal(await countRows(t, "run_logs"), logs);
  assert.equal(await runStatus(job.runId), "succeeded");
});

test("a token seen at its claim whose job was dispatched again: its finish is job_lost and writes nothing; the new token's finish lands", async () => {
  const old = await startScriptJob(t);
  await claim(old); // the server has seen this token's job live: its finish takes the quick path
  // The lease lapsed and the job went to another agent: as the dispatcher requeues and dispatches it.
  await t.db.pool.query(`update jobs set status = 'queued', token_digest = null, lease_expires_at = null where id = $1`, [old.jobId]);
  const next = await dispatchJob(t, old.runId);
  assert.equal(next.jobId, old.jobId);
  const logs = await countRows(t, "run_logs");
  for (const body of [
    { exit_code: 0, duration_ms: 1, log: [{ stream: "stdout", data: "stale\n" }] },
    { exit_code: 3, duration_ms: 1, error: "stale failure" },
  ]) {
    const res = await agent("finish", old, body);
    assertError(
      res,
      409,
      /this job's lease is gone: it finished, or it was dispatched again to another agent/,
      `stale finish exit ${body.exit_code}`,
    );
    assert.equal(await runStatus(old.runId), "running", "a stale finish changes nothing");
  }
  assert.equal(await countRows(t, "run_logs"), logs);
  await claim(next);
  const done = await agent("finish", next, { exit_code: 0, duration_ms: 1 });
  assert.equal(done.status, 200, done.text);
  assert.equal(await runStatus(old.runId), "succeeded");
});

test("a different call at a recorded position is the determinism refusal (422), naming both calls", async () => {
  const job = await startScriptJob(t);
  await claim(job);
  await agent("journal", job, step(0, "build"));
  const res = await agent("journal", job, step(0, "deploy"));
  assertError(res, 422, /^determinism error at call #0: the journal recorded .*build.* but the script called .*deploy/);
  assert.equal(res.error?.code, "determinism");
  assert.deepEqual((res.error?.details as { recorded: { name: string } }).recorded.name, "build");
  const ordinal = await agent("journal", job, { ...step(0, "build"), ordinal: 1 });
  assertError(ordinal, 422, /^determinism error at call #0/, "the same name with another ordinal");
  const { rows } = await t.db.pool.query<{ name: string }>(`select name from journal where run_id = $1`, [job.runId]);
  assert.deepEqual(
    rows.map((r) => r.name),
    ["build"],
    "nothing was recorded for the refused calls",
  );
  await agent("finish", job, { exit_code: 0, duration_ms: 0 });
});

test("an activity job: its claim is a command; it may not finish on the script route nor make calls; a script job may not finish-activity", async () => {
  const { script, activity } = await activityJob();
  const claimed = await claim(activity);
  assert.equal(claimed.status, 200, claimed.text);
  const c = claimed.body as { kind: string; name: string; argv: string[]; run_id: string };
  assert.deepEqual([c.kind, c.name, c.argv, c.run_id], ["activity", "fan", ["echo", "out"], script.runId]);
  assertError(
    await agent("finish", activity, { exit_code: 0, duration_ms: 1 }),
    400,
    /^an activity job ends with POST \/agent\/v1\/finish-activity, not \/agent\/v1\/finish$/,
  );
  assertError(
    await agent("call", activity, { position: 0, kind: "sleep", name: "s", ordinal: 0, args: { duration_ms: 1 } }),
    400,
    /^an activity job cannot make durable calls$/,
  );
  assertError(
    await agent("finish-activity", script, { exit_code: 0, stdout_b64: "", duration_ms: 1 }),
    400,
    /^this job is not an activity$/,
  );
  const done = await agent("finish-activity", activity, {
    exit_code: 0,
    stdout_b64: Buffer.from("out\n").toString("base64"),
    duration_ms: 1,
  });
  assert.deepEqual([done.status, done.body], [200, { status: "succeeded" }]);
  const { rows } = await t.db.pool.query<{ status: string; exit_code: number }>(
    `select status, exit_code from activities where run_id = $1`,
    [script.runId],
  );
  assert.deepEqual(rows, [{ status: "succeeded", exit_code: 0 }]);
  assertError(await agent("finish-activity", activity, { exit_code: 0, stdout_b64: "", duration_ms: 1 }), 409, /this job's lease is gone/);
  await agent("finish", script, { exit_code: 0, duration_ms: 0 });
});

test("durable calls: state set, get, list and delete; a wait parks the run on suspend", async () => {
  const job = await startScriptJob(t);
  await claim(job);
  assert.deepEqual((await agent("state", job, { op: "set", key: "k", value: { n: 1 } })).body, {});
  assert.deepEqual((await agent("state", job, { op: "get", key: "k" })).body, { value: { n: 1 }, found: true });
  assert.deepEqual((await agent("state", job, { op: "list" })).body, { items: [{ key: "k", value: { n: 1 } }] });
  assert.deepEqual((await agent("state", job, { op: "delete", key: "k" })).body, {});
  assert.deepEqual((await agent("state", job, { op: "get", key: "k" })).body, { value: null, found: false });
  const wait = await agent("call", job, { position: 0, kind: "wait-signal", name: "go", ordinal: 0, args: {} });
  assert.equal((wait.body as { status: string }).status, "pending", wait.text);
  assert.deepEqual((await agent("suspend", job)).body, { status: "parked" });
  assert.equal(await runStatus(job.runId), "parked");
  assertError(await agent("heartbeat", job), 409, /this job's lease is gone/, "a suspended job's token is spent");
  await ask(t, "POST", `${t.project.base}/runs/${job.runId}/cancel`, { body: {} });
});

test("bad agent bodies are a 400 naming the field, and write nothing", async () => {
  const job = await startScriptJob(t);
  assertError(await agent("claim", job, {}), 400, /^agent_id: /);
  assertError(await agent("claim", job, { agent_id: "a".repeat(65) }), 400, /^agent_id: /);
  await claim(job);
  assertError(await agent("journal", job, { ...step(0, "s"), position: -1 }), 400, /^position: /);
  assertError(await agent("journal", job, { ...step(0, "s"), kind: "" }), 400, /^kind: /);
  assertError(await agent("log", job, { chunks: [{ stream: "stdin", data: "x" }] }), 400, /^chunks\.0\.stream: /);
  assertError(await agent("annotate", job, { markdown: "" }), 400, /^markdown: /);
  assertError(await agent("finish", job, { exit_code: "0", duration_ms: 1 }), 400, /^exit_code: /);
  assertError(await agent("call", job, { position: 0, kind: "explode", name: "x", ordinal: 0 }), 400, /^kind: /);
  assertError(
    await agent("call", job, { position: 0, kind: "sleep", name: "x", ordinal: 0, args: { duration_ms: -1 } }),
    400,
    /duration_ms/,
  );
  assertError(await agent("state", job, { op: "get" }), 400, /^key: /);
  const { rows } = await t.db.pool.query(`select 1 from journal where run_id = $1`, [job.runId]);
  assert.equal(rows.length, 0, "no refused call was recorded");
  assert.equal(await runStatus(job.runId), "running");
  await agent("finish", job, { exit_code: 0, duration_ms: 0 });
});

test("hostile agent bodies: NUL, lone surrogates, deep nesting, huge numbers, refused with where", async () => {
  const job = await startScriptJob(t);
  await claim(job);
  const before = [await countRows(t, "journal"), await countRows(t, "run_logs")];
  assertError(
    await agent("log", job, { chunks: [{ stream: "stdout", data: "a\u0000b" }] }),
    400,
    /^body\.chunks\[0\]\.data holds a NUL character/,
  );
  assertError(await agent("annotate", job, { markdown: "\ud800" }), 400, /^body\.markdown holds a lone UTF-16 surrogate/);
  assertError(await agent("journal", job, step(0, "\udfffx")), 400, /^body\.name holds a lone UTF-16 surrogate/);
  assertError(
    await agent("call", job, `{"position":0,"kind":"emit","name":"e","ordinal":0,"args":{"type":"a.b","payload":${deepJson(200)}}}`),
    400,
    /is nested more than 128 levels deep/,
  );
  assertError(await agent("journal", job, { ...step(0, "s"), position: 1e308 }), 400, /^position: /);
  assertError(
    await agent("journal", job, `{"position":1e999,"kind":"step","name":"s","ordinal":0,"result":null}`),
    400,
    /^body\.position is a number outside the range a JSON number can be stored in/,
  );
  assertError(await agent("journal", job, { ...step(0, "s"), ordinal: 2 ** 64 }), 400, /^ordinal: /);
  assertError(await agent("finish", job, { exit_code: Number.MAX_SAFE_INTEGER * 4, duration_ms: 0 }), 400, /^exit_code: /);
  assertError(
    await ask(t, "POST", "/agent/v1/claim%00", { as: { token: job.token }, body: {} }),
    400,
    /^path parameter \* holds a NUL character/,
  );
  assertError(await ask(t, "POST", "/agent/v1/claim%zz", { as: { token: job.token }, body: {} }), 400, /not valid percent-encoding/);
  assert.deepEqual([await countRows(t, "journal"), await countRows(t, "run_logs")], before, "nothing was written");
  await agent("finish", job, { exit_code: 0, duration_ms: 0 });
});
