/**
 * The run lifecycle (run-lifecycle.ts) on a real Postgres: how a run is created, how a script
 * job's finish ends or retries it, how the dispatcher gives up on a job, and that each change
 * appends its `run.*` event in the same transaction.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { FlowError, HANDLER_RUNS_IN_FLIGHT_LIMIT, createValueMasker, type RunRequest } from "@flowsvc/core";
import { createTestDatabase, createTestProject, type TestDatabase } from "./testing.js";
import { withTransaction } from "./pool.js";
import { createRun, createRuns, finishActivityJob, finishScriptJob, giveUpJob, startRunIfNeeded } from "./run-lifecycle.js";
import { recordJournal } from "./journal.js";
import { submitActivity } from "./activities.js";
import { mintId } from "./mint.js";

let db: TestDatabase;

before(async () => {
  db = await createTestDatabase();
});
after(async () => db?.drop());

const SECRET = "hunter2-swordfish";
const masker = createValueMasker([SECRET]);
const noMasker = createValueMasker([]);

const newProject = async (): Promise<string> => (await createTestProject(db.pool)).projectId;

const one = async <T extends object>(sql: string, params: unknown[]): Promise<T> => {
  const { rows } = await db.pool.query<T & object>(sql, params);
  assert.ok(rows[0], `no row for: ${sql}`);
  return rows[0];
};

interface RunRow {
  status: string;
  interpreter: string[];
  attempt: number;
  output: Record<string, unknown> | null;
  error: string | null;
  handler_name: string | null;
  generation: number;
  trusted: boolean;
}
const runRow = (id: string): Promise<RunRow> =>
  one<RunRow>(`select status, interpreter, attempt, output, error, handler_name, generation, trusted from runs where id = $1`, [id]);

const jobsOf = async (
  runId: string,
): Promise<Array<{ id: string; status: string; kind: string; capabilities: string[]; delayed: boolean }>> =>
  (
    await db.pool.query<{ id: string; status: string; kind: string; capabilities: string[]; delayed: boolean }>(
      `select id, status, kind, capabilities, not_before > now() as delayed from jobs where run_id = $1 order by created_at, id`,
      [runId],
    )
  ).rows;

const eventsOf = async (runId: string): Promise<Array<{ type: string; payload: Record<string, unknown> }>> =>
  (
    await db.pool.query<{ type: string; payload: Record<string, unknown> }>(
      `select type, payload from events where source_run_id = $1 order by seq`,
      [runId],
    )
  ).rows;

/** A submitted run whose job an agent claimed: running, `run.started` appended. */
const runningRun = async (
  projectId: string,
  extra: Partial<RunRequest> = {},
): Promise<{ runId: string; job: { id: string; run_id: string } }> => {
  const { id: runId } = await withTransaction(db.pool, (tx) =>
    createRun(tx, { projectId, source: "echo hi\n", filename: "s.sh", trusted: true, ...extra }),
  );
  const [job] = await jobsOf(runId);
  assert.ok(job);
  await db.pool.query(`update jobs set status = 'running' where id = $1`, [job.id]);
  await withTransaction(db.pool, (tx) => startRunIfNeeded(tx, runId, undefined));
  return { runId, job: { id: job.id, run_id: runId } };
};

const finish = (job: { id: string; run_id: string }, f: { exitCode: number; outputs?: Record<string, string>; error?: string }) =>
  withTransaction(db.pool, (tx) =>
    finishScriptJob(tx, {
      job,
      exitCode: f.exitCode,
      outputs: f.outputs ?? {},
      error: f.error,
      durationMs: 42,
      masker,
      publicUrl: undefined,
    }),
  );

void test("createRun fills in core's defaults: a manual script run, its interpreter picked by extension, a queued job needing nothing", async () => {
  const p = await newProject();
  const { id, duplicate } = await withTransaction(db.pool, (tx) =>
    createRun(tx, { projectId: p, source: "print(1)\n", filename: "job.PY", trusted: false }),
  );
  assert.equal(duplicate, false);
  const run = await runRow(id);
  assert.deepEqual(
    [run.status, run.interpreter, run.attempt, run.handler_name, run.generation, run.trusted],
    ["queued", ["python3"], 1, null, 0, false],
  );
  assert.deepEqual(
    (await jobsOf(id)).map((j) => [j.status, j.kind, j.capabilities]),
    [["queued", "run", []]],
  );
});

void test("createRun under an idempotency key already used answers the first run and writes nothing", async () => {
  const p = await newProject();
  const req = { projectId: p, source: "echo 1\n", filename: "a.sh", idempotencyKey: "deploy-\u00e9-%2F-\u{1F600}", trusted: true };
  const first = await withTransaction(db.pool, (tx) => createRun(tx, req));
  const again = await withTransaction(db.pool, (tx) => createRun(tx, { ...req, source: "echo 2\n" }));
  assert.deepEqual(again, { id: first.id, duplicate: true });
  const counts = await one<{ runs: number; jobs: number }>(
    `select (select count(*)::int from runs where project_id = $1) as runs, (select count(*)::int from jobs j join runs r on r.id = j.run_id where r.project_id = $1) as jobs`,
    [p],
  );
  assert.deepEqual(counts, { runs: 1, jobs: 1 });
  // The key is unique per project only (migration 026's partial index): the same key elsewhere, and runs without one, are new runs.
  const other = await newProject();
  const elsewhere = await withTransaction(db.pool, (tx) => createRun(tx, { ...req, projectId: other }));
  assert.equal(elsewhere.duplicate, false);
  const unkeyed = { ...req, idempotencyKey: null };
  const [a, b] = [
    await withTransaction(db.pool, (tx) => createRun(tx, unkeyed)),
    await withTransaction(db.pool, (tx) => createRun(tx, unkeyed)),
  ];
  assert.deepEqual([a.duplicate, b.duplicate, a.id === b.id], [false, false, false]);
});

void test("a handler's run runs under bash -eu and needs polyglot, whatever its filename or the interpreter asked for (spec: Handler)", async () => {
  const p = await newProject();
  const id = mintId("run");
  const { created, overLimit } = await withTransaction(db.pool, (tx) =>
    createRuns(tx, [
      {
        id,
        projectId: p,
        source: "print(1)\n",
        filename: "h.py",
        interpreter: ["python3"],
        capabilities: ["gpu"],
        trusted: true,
        handler: { name: "h", eventId: "evt-1", generation: 2 },
      },
    ]),
  );
  assert.deepEqual([[...created], overLimit.size], [[id], 0]);
  const run = await runRow(id);
  assert.deepEqual([run.interpreter, run.handler_name, run.generation], [["bash", "-eu"], "h", 2]);
  assert.deepEqual(
    (await jobsOf(id)).map((j) => j.capabilities),
    [["polyglot"]],
  );
});

void test("over the handler limit a batch inserts none of that project's handler runs and reports the count; other runs go in", async () => {
  const p = await newProject();
  const handlerRun = (i: number): RunRequest => ({
    id: mintId("run"),
    projectId: p,
    source: "true\n",
    filename: "h.sh",
    trusted: true,
    handler: { name: `h${i}`, eventId: `evt-${i}`, generation: 1 },
  });
  const full = Array.from({ length: HANDLER_RUNS_IN_FLIGHT_LIMIT }, (_, i) => handlerRun(i));
  assert.equal((await withTransaction(db.pool, (tx) => createRuns(tx, full))).created.size, HANDLER_RUNS_IN_FLIGHT_LIMIT);
  const plain: RunRequest = { id: mintId("run"), projectId: p, source: "true\n", filename: "s.sh", trusted: true };
  const extra = handlerRun(99);
  const res = await withTransaction(db.pool, (tx) => createRuns(tx, [extra, plain]));
  assert.deepEqual([...res.created], [plain.id]);
  assert.deepEqual([...res.overLimit], [[p, HANDLER_RUNS_IN_FLIGHT_LIMIT]]);
  assert.equal((await db.pool.query(`select 1 from runs where id = $1`, [extra.id])).rowCount, 0);
  // A run whose id is taken (a replayed emit asks for the same handler run id) is not inserted twice.
  const replay = await withTransaction(db.pool, (tx) => createRuns(tx, [plain]));
  assert.equal(replay.created.size, 0);
});

void test("exit 0 succeeds the run with its outputs masked, and run.succeeded carries them", async () => {
  const p = await newProject();
  const { runId, job } = await runningRun(p);
  assert.equal(await finish(job, { exitCode: 0, outputs: { url: `https://x/?t=${SECRET}`, n: "1" } }), "succeeded");
  const run = await runRow(runId);
  assert.equal(run.status, "succeeded");
  assert.deepEqual(run.output, { url: "https://x/?t=***", n: "1", exit_code: 0, duration_ms: 42 });
  assert.ok(!JSON.stringify(await eventsOf(runId)).includes(SECRET));
  assert.deepEqual(
    (await eventsOf(runId)).map((e) => [e.type, e.payload["output"] ?? null]),
    [
      ["run.started", null],
      ["run.succeeded", run.output],
    ],
  );
  assert.deepEqual(
    (await jobsOf(runId)).map((j) => j.status),
    ["done"],
  );
});

void test("a handler's run finishes like any run: run.succeeded is recorded, and delivered to no handler (it cannot feed itself)", async () => {
  const p = await newProject();
  await db.pool.query(`insert into handlers (project_id, name, patterns, reaction) values ($1, 'watcher', '{run.*}', $2)`, [
    p,
    JSON.stringify({ kind: "script", source: "true\n", filename: "w.sh" }),
  ]);
  const id = mintId("run");
  await withTransaction(db.pool, (tx) =>
    createRuns(tx, [
      { id, projectId: p, source: "true\n", filename: "h.sh", trusted: true, handler: { name: "h", eventId: "evt-x", generation: 1 } },
    ]),
  );
  const [job] = await jobsOf(id);
  await db.pool.query(`update jobs set status = 'running' where id = $1`, [job!.id]);
  await withTransaction(db.pool, (tx) => startRunIfNeeded(tx, id, undefined));
  assert.equal(await finish({ id: job!.id, run_id: id }, { exitCode: 0 }), "succeeded");
  assert.deepEqual(
    (await eventsOf(id)).map((e) => e.type),
    ["run.started", "run.succeeded"],
  );
  assert.equal((await db.pool.query(`select 1 from runs where project_id = $1 and handler_name = 'watcher'`, [p])).rowCount, 0);
  // A script run's run.* events do reach the watcher.
  const { job: scriptJob } = await runningRun(p);
  assert.equal(await finish(scriptJob, { exitCode: 0 }), "succeeded");
  assert.equal((await db.pool.query(`select 1 from runs where project_id = $1 and handler_name = 'watcher'`, [p])).rowCount, 2);
});

void test("a nonzero exit without a retry policy fails the run; its error is masked, or says the exit code when the agent sent none", async () => {
  const p = await newProject();
  const a = await runningRun(p);
  assert.equal(await finish(a.job, { exitCode: 3 }), "failed");
  const ra = await runRow(a.runId);
  assert.deepEqual([ra.status, ra.error, ra.output], ["failed", "the script exited with code 3", { exit_code: 3, duration_ms: 42 }]);
  assert.deepEqual(
    (await eventsOf(a.runId)).map((e) => [e.type, e.payload["error"] ?? null]),
    [
      ["run.started", null],
      ["run.failed", "the script exited with code 3"],
    ],
  );

  // A long error with the secret in it: stored whole and masked; the event keeps its masked tail.
  const b = await runningRun(p);
  const long = `${"x".repeat(10_000)} token=${SECRET}\u0007 \u{1F600}%00 end`;
  assert.equal(await finish(b.job, { exitCode: 1, error: long }), "failed");
  const rb = await runRow(b.runId);
  assert.equal(rb.error, masker.text(long));
  assert.ok(!rb.error?.includes(SECRET));
  const failed = (await eventsOf(b.runId)).find((e) => e.type === "run.failed")!;
  assert.equal((failed.payload["error"] as string).length, 4000);
  assert.ok(!(failed.payload["error"] as string).includes(SECRET));
});

void test("a failed attempt with attempts left retries: journal purged, a delayed job queued, no terminal event; the last attempt fails", async () => {
  const p = await newProject();
  const { runId, job } = await runningRun(p, { retry: { attempts: 2, backoff_ms: 60_000 } });
  await recordJournal(db.pool, runId, {
    position: 0,
    kind: "step",
    name: "build",
    ordinal: 0,
    status: "done",
    result: { exit: 0, stdout_b64: "" },
  });
  assert.equal(await finish(job, { exitCode: 1, error: `boom ${SECRET}` }), "retrying");
  const run = await runRow(runId);
  assert.deepEqual([run.status, run.attempt, run.error], ["queued", 2, "boom ***"]);
  assert.equal((await db.pool.query(`select 1 from journal where run_id = $1`, [runId])).rowCount, 0);
  const jobs = await jobsOf(runId);
  assert.deepEqual(
    jobs.map((j) => [j.status, j.delayed]),
    [
      ["done", false],
      ["queued", true],
    ],
  );
  assert.deepEqual(
    (await eventsOf(runId)).map((e) => e.type),
    ["run.started"],
  );

  // The second attempt is the last: its failure fails the run.
  const second = jobs[1]!;
  await db.pool.query(`update jobs set status = 'running' where id = $1`, [second.id]);
  await withTransaction(db.pool, (tx) => startRunIfNeeded(tx, runId, undefined));
  assert.equal(await finish({ id: second.id, run_id: runId }, { exitCode: 2 }), "failed");
  assert.deepEqual([(await runRow(runId)).status, (await runRow(runId)).attempt], ["failed", 2]);
  assert.deepEqual(
    (await eventsOf(runId)).map((e) => e.type),
    ["run.started", "run.failed"],
  );
});

void test("outputs or an error Postgres cannot store (NUL, a lone surrogate) are refused by name, and the job stays live", async () => {
  const p = await newProject();
  const { runId, job } = await runningRun(p);
  const refused = (path: string) => (err: unknown) =>
    err instanceof FlowError && err.code === "invalid_argument" && err.message.includes(path);
  await assert.rejects(finish(job, { exitCode: 1, error: "bad \ud800 byte" }), refused("finish.error"));
  await assert.rejects(finish(job, { exitCode: 0, outputs: { "k\u0000": "v" } }), refused("finish.outputs"));
  await assert.rejects(finish(job, { exitCode: 0, outputs: { k: "v\u0000" } }), refused("finish.outputs"));
  assert.equal((await runRow(runId)).status, "running");
  assert.deepEqual(
    (await jobsOf(runId)).map((j) => j.status),
    ["running"],
  );
  assert.deepEqual(
    (await eventsOf(runId)).map((e) => e.type),
    ["run.started"],
  );
  assert.equal(await finish(job, { exitCode: 0 }), "succeeded");
});

void test("a second finish of the same job is refused with job_lost and changes nothing", async () => {
  const p = await newProject();
  const { runId, job } = await runningRun(p, { retry: { attempts: 3, backoff_ms: 0 } });
  assert.equal(await finish(job, { exitCode: 0 }), "succeeded");
  await assert.rejects(finish(job, { exitCode: 1, error: "late" }), (err: unknown) => err instanceof FlowError && err.code === "job_lost");
  const run = await runRow(runId);
  assert.deepEqual([run.status, run.attempt, run.error], ["succeeded", 1, null]);
  assert.deepEqual(
    (await eventsOf(runId)).map((e) => e.type),
    ["run.started", "run.succeeded"],
  );
});

void test("a successful finish of a job no longer live is job_lost and releases nothing: the run keeps its lease and stays running", async () => {
  const p = await newProject();
  const { runId, job } = await runningRun(p);
  await db.pool.query(`insert into lock_leases (project_id, grp, run_id, position, granted_at) values ($1, 'deploy', $2, 0, now())`, [
    p,
    runId,
  ]);
  // The lease lapsed and the job was dispatched again under a new token: this finish comes too late.
  await db.pool.query(`update jobs set status = 'done', token_digest = null where id = $1`, [job.id]);
  await assert.rejects(finish(job, { exitCode: 0 }), (err: unknown) => err instanceof FlowError && err.code === "job_lost");
  assert.equal((await runRow(runId)).status, "running");
  const open = await one<{ n: string }>(`select count(*) as n from lock_leases where run_id = $1 and released_at is null`, [runId]);
  assert.equal(Number(open.n), 1);
  assert.deepEqual(
    (await eventsOf(runId)).map((e) => e.type),
    ["run.started"],
  );
  // Its run's events carry the run as its update left it: run.started says running, run.succeeded the output.
  const { runId: other, job: live } = await runningRun(p);
  assert.equal(await finish(live, { exitCode: 0, outputs: { k: "v" } }), "succeeded");
  const events = await eventsOf(other);
  assert.deepEqual(
    events.map((e) => [e.type, e.payload["status"]]),
    [
      ["run.started", "running"],
      ["run.succeeded", "succeeded"],
    ],
  );
  assert.deepEqual(events[1]!.payload["output"], { k: "v", exit_code: 0, duration_ms: 42 });
});

void test("the run's end and its run.* event are one transaction: rolled back together, and neither is left half-written", async () => {
  const p = await newProject();
  const { runId, job } = await runningRun(p);
  await assert.rejects(
    withTransaction(db.pool, async (tx) => {
      await finishScriptJob(tx, { job, exitCode: 0, outputs: {}, durationMs: 1, masker: noMasker, publicUrl: undefined });
      throw new Error("the caller failed after the finish");
    }),
    /the caller failed/,
  );
  assert.equal((await runRow(runId)).status, "running");
  assert.deepEqual(
    (await eventsOf(runId)).map((e) => e.type),
    ["run.started"],
  );
  assert.deepEqual(
    (await jobsOf(runId)).map((j) => j.status),
    ["running"],
  );
  // The job is still live: the agent's retried finish is taken.
  assert.equal(await finish(job, { exitCode: 0 }), "succeeded");
});

void test("giving up on a script job fails its run with how often it was dispatched; on an activity job, fails the child only", async () => {
  const p = await newProject();
  const { runId, job } = await runningRun(p);
  const error = await withTransaction(db.pool, (tx) =>
    giveUpJob(tx, { job: { ...job, kind: "run", activity_id: null }, attempts: 5, publicUrl: undefined }),
  );
  assert.equal(error, "the job was dispatched 5 times and no agent finished it");
  assert.deepEqual([(await runRow(runId)).status, (await runRow(runId)).error], ["failed", error]);
  assert.deepEqual(
    (await eventsOf(runId)).map((e) => e.type),
    ["run.started", "run.failed"],
  );
  // A job no longer live is left alone.
  assert.equal(
    await withTransaction(db.pool, (tx) =>
      giveUpJob(tx, { job: { ...job, kind: "run", activity_id: null }, attempts: 6, publicUrl: undefined }),
    ),
    undefined,
  );
  assert.equal((await runRow(runId)).error, error);

  const parent = await runningRun(p);
  const activityId = await withTransaction(db.pool, (tx) =>
    submitActivity(tx, { runId: parent.runId, position: 0, name: "child", argv: ["true"], requires: [] }),
  );
  const child = (await jobsOf(parent.runId)).find((j) => j.kind === "activity")!;
  await db.pool.query(`update jobs set status = 'dispatched' where id = $1`, [child.id]);
  await withTransaction(db.pool, (tx) =>
    giveUpJob(tx, {
      job: { id: child.id, run_id: parent.runId, kind: "activity", activity_id: activityId },
      attempts: 5,
      publicUrl: undefined,
    }),
  );
  const act = await one<{ status: string; error: string }>(`select status, error from activities where id = $1`, [activityId]);
  assert.deepEqual(act, { status: "failed", error: "the job was dispatched 5 times and no agent finished it" });
  assert.equal((await runRow(parent.runId)).status, "running");
});

void test("an activity job's finish records the child once; a second finish is refused with job_lost", async () => {
  const p = await newProject();
  const parent = await runningRun(p);
  const activityId = await withTransaction(db.pool, (tx) =>
    submitActivity(tx, { runId: parent.runId, position: 0, name: "c", argv: ["true"], requires: [] }),
  );
  const child = (await jobsOf(parent.runId)).find((j) => j.kind === "activity")!;
  await db.pool.query(`update jobs set status = 'running' where id = $1`, [child.id]);
  const outcome = { exit_code: 4, stdout_b64: "", error: "no" };
  assert.equal(await withTransaction(db.pool, (tx) => finishActivityJob(tx, { job: child, activityId, outcome })), "failed");
  await assert.rejects(
    withTransaction(db.pool, (tx) => finishActivityJob(tx, { job: child, activityId, outcome: { exit_code: 0, stdout_b64: "" } })),
    (err: unknown) => err instanceof FlowError && err.code === "job_lost",
  );
  assert.deepEqual(await one(`select status, exit_code from activities where id = $1`, [activityId]), { status: "failed", exit_code: 4 });
});
