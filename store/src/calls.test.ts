/**
 * The wait engine on a real Postgres: durable calls that park a run, and everything that wakes it.
 * No agent here: these drive performCall / suspendJob / deliverSignal as the agent API does.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { parseGraph, type CallRequest } from "@flowsvc/core";
import { createTestDatabase, createTestProject, type TestDatabase } from "./testing.js";
import { withTransaction } from "./pool.js";
import { performCall } from "./calls.js";
import { deliverSignal } from "./signals.js";
import { dueWaits, resolveDueWait, suspendJob } from "./wake.js";
import { finishActivity } from "./activities.js";
import { completeRun } from "./run-lifecycle.js";
import { mintId } from "./mint.js";

let db: TestDatabase;
let projectId: string;

before(async () => {
  db = await createTestDatabase();
  ({ projectId } = await createTestProject(db.pool));
});
after(async () => db?.drop());

/** A running script run with one running job, as right after an agent's claim. */
const newRun = async (): Promise<{ runId: string; jobId: string }> => {
  const runId = mintId("run");
  const jobId = mintId("job");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted) values ($1, $2, 'flowsvc/script/v1', 'running', '', 's.sh', '{bash}', '{}', true)`,
    [runId, projectId],
  );
  await db.pool.query(`insert into jobs (id, run_id, status) values ($1, $2, 'running')`, [jobId, runId]);
  return { runId, jobId };
};

const call = (runId: string, req: Partial<CallRequest> & Pick<CallRequest, "position" | "kind">) =>
  withTransaction(db.pool, (tx) => performCall(tx, runId, { name: "", ordinal: 0, args: {}, ...req }));

const runRow = async (runId: string) =>
  (
    await db.pool.query<{ status: string; substate: { name: string } | null; wake_requested: boolean }>(
      `select status, substate, wake_requested from runs where id = $1`,
      [runId],
    )
  ).rows[0]!;

const queuedJobs = async (runId: string): Promise<number> =>
  Number(
    (await db.pool.query<{ n: string }>(`select count(*) as n from jobs where run_id = $1 and status = 'queued'`, [runId])).rows[0]!.n,
  );

const signal = (runId: string, name: string, payload: unknown) =>
  withTransaction(db.pool, (tx) => deliverSignal(tx, runId, { name, payload, sentBy: "tester" }));

void test("signals sent before the wait queue up and each wait takes the next one in order", async () => {
  const { runId } = await newRun();
  await signal(runId, "go", { n: 1 });
  await signal(runId, "go", { n: 2 });
  const first = await call(runId, { position: 0, kind: "wait-signal", name: "go" });
  const second = await call(runId, { position: 1, kind: "wait-signal", name: "go" });
  assert.equal(first.status, "done");
  assert.deepEqual(first.entry.result, { payload: { n: 1 } });
  assert.deepEqual(second.entry.result, { payload: { n: 2 } });
  const third = await call(runId, { position: 2, kind: "wait-signal", name: "go" });
  assert.equal(third.status, "pending");
  if (third.status === "pending") assert.equal(third.substate.name, "go");
});

void test("a wait parks the run; a signal wakes it with a new job; the replayed call answers the payload", async () => {
  const { runId, jobId } = await newRun();
  assert.equal((await call(runId, { position: 0, kind: "wait-signal", name: "approve" })).status, "pending");
  assert.equal(await withTransaction(db.pool, (tx) => suspendJob(tx, jobId, runId)), "parked");
  assert.equal((await runRow(runId)).status, "parked");
  assert.deepEqual((await runRow(runId)).substate, { name: "approve", kind: "wait-signal" });
  assert.equal((await signal(runId, "approve", "yes")).delivered, true);
  assert.equal((await runRow(runId)).status, "queued");
  assert.equal(await queuedJobs(runId), 1);
  const replay = await call(runId, { position: 0, kind: "wait-signal", name: "approve" });
  assert.deepEqual(replay.entry.result, { payload: "yes" });
});

void test("a signal that lands while the job winds down turns the suspend into a requeue: no wake is lost", async () => {
  const { runId, jobId } = await newRun();
  assert.equal((await call(runId, { position: 0, kind: "wait-signal", name: "race" })).status, "pending");
  await signal(runId, "race", 1);
  assert.equal((await runRow(runId)).wake_requested, true);
  assert.equal(await withTransaction(db.pool, (tx) => suspendJob(tx, jobId, runId)), "requeued");
  assert.equal((await runRow(runId)).status, "queued");
  assert.equal(await queuedJobs(runId), 1);
});

void test("a timed-out wait is pinned: a later signal stays queued for the next wait and does not change it", async () => {
  const { runId, jobId } = await newRun();
  const args = { timeout_ms: 3_600_000 };
  assert.equal((await call(runId, { position: 0, kind: "wait-signal", name: "late", args })).status, "pending");
  await withTransaction(db.pool, (tx) => suspendJob(tx, jobId, runId));
  assert.deepEqual(
    (await dueWaits(db.pool)).filter((w) => w.run_id === runId),
    [],
    "an hour's wait is not due yet",
  );
  // The clock is Postgres's now(): move the deadline into the past instead of waiting for it.
  await db.pool.query(`update journal set deadline = deadline - interval '2 hours' where run_id = $1 and position = 0`, [runId]);
  const due = (await dueWaits(db.pool)).filter((w) => w.run_id === runId);
  assert.deepEqual(due, [{ run_id: runId, position: 0 }]);
  for (const w of due) await withTransaction(db.pool, (tx) => resolveDueWait(tx, w.run_id, w.position));
  assert.equal((await runRow(runId)).status, "queued");
  await signal(runId, "late", "too late");
  const again = await call(runId, { position: 0, kind: "wait-signal", name: "late", args });
  assert.deepEqual(again.entry.result, { timed_out: true });
  const next = await call(runId, { position: 1, kind: "wait-signal", name: "late" });
  assert.deepEqual(next.entry.result, { payload: "too late" });
});

void test("a zero-length sleep parks and is woken at the suspend itself, not by a later timer tick", async () => {
  const { runId, jobId } = await newRun();
  assert.equal((await call(runId, { position: 0, kind: "sleep", args: { duration_ms: 0 } })).status, "pending");
  assert.equal(await withTransaction(db.pool, (tx) => suspendJob(tx, jobId, runId)), "requeued");
  assert.equal((await call(runId, { position: 0, kind: "sleep", args: { duration_ms: 0 } })).status, "done");
});

void test("leases are granted FIFO and pass to the next waiter when the holder's run ends", async () => {
  const a = await newRun();
  const b = await newRun();
  const c = await newRun();
  assert.equal((await call(a.runId, { position: 0, kind: "lock", name: "deploy" })).status, "done");
  const bWait = await call(b.runId, { position: 0, kind: "lock", name: "deploy" });
  assert.equal(bWait.status, "pending");
  if (bWait.status === "pending") assert.equal(bWait.substate.name, "awaiting_lease");
  assert.equal((await call(c.runId, { position: 0, kind: "lock", name: "deploy" })).status, "pending");
  await withTransaction(db.pool, (tx) => suspendJob(tx, b.jobId, b.runId));
  await withTransaction(db.pool, (tx) => suspendJob(tx, c.jobId, c.runId));
  await withTransaction(db.pool, (tx) => completeRun(tx, a.runId, { status: "succeeded", output: {} }, undefined));
  assert.equal((await runRow(b.runId)).status, "queued", "b asked first and is granted");
  assert.equal((await runRow(c.runId)).status, "parked", "c still waits");
  assert.equal((await call(b.runId, { position: 0, kind: "lock", name: "deploy" })).status, "done");
  assert.equal((await call(b.runId, { position: 1, kind: "unlock", name: "deploy" })).status, "done");
  assert.equal((await runRow(c.runId)).status, "queued", "the bracketed release passes the lease on");
});

void test("a different call at a recorded position is a determinism error naming both calls", async () => {
  const { runId } = await newRun();
  await call(runId, { position: 0, kind: "sleep", args: { duration_ms: 1000 } });
  await assert.rejects(
    call(runId, { position: 0, kind: "wait-signal", name: "x" }),
    /determinism error at call #0: the journal recorded sleep ""#0 but the script called wait-signal "x"#0/,
  );
});

void test("a failed uncollected activity does not block the run; ending the run annotates it", async () => {
  const { runId } = await newRun();
  const sub = await call(runId, { position: 0, kind: "activity-submit", name: "build", args: { argv: ["false"] } });
  assert.equal(sub.status, "done");
  const actId = (sub.entry.result as { activity_id: string }).activity_id;
  await assert.rejects(
    call(runId, { position: 1, kind: "activity-submit", name: "build", args: { argv: ["true"] } }),
    /activity names must be distinct/,
  );
  await withTransaction(db.pool, (tx) => finishActivity(tx, actId, { exit_code: 3, stdout_b64: "" }));
  await withTransaction(db.pool, (tx) => completeRun(tx, runId, { status: "succeeded", output: {} }, undefined));
  const { rows } = await db.pool.query<{ status: string; annotations: Array<{ markdown: string }> }>(
    `select status, annotations from runs where id = $1`,
    [runId],
  );
  assert.equal(rows[0]!.status, "succeeded");
  assert.match(rows[0]!.annotations[0]!.markdown, /1 activity was never collected: `build` \(failed, exit 3\)/);
});

void test("collect parks until the child ends, then answers its stdout and exit code", async () => {
  const { runId, jobId } = await newRun();
  const sub = await call(runId, {
    position: 0,
    kind: "activity-submit",
    name: "t",
    args: { argv: ["echo", "hi"], requires: ["polyglot"] },
  });
  const actId = (sub.entry.result as { activity_id: string }).activity_id;
  const jobs = await db.pool.query<{ capabilities: string[] }>(`select capabilities from jobs where activity_id = $1`, [actId]);
  assert.deepEqual(jobs.rows[0]!.capabilities, ["polyglot"]);
  assert.equal((await call(runId, { position: 1, kind: "activity-collect", name: "t" })).status, "pending");
  await withTransaction(db.pool, (tx) => suspendJob(tx, jobId, runId));
  await withTransaction(db.pool, (tx) => finishActivity(tx, actId, { exit_code: 0, stdout_b64: Buffer.from("hi\n").toString("base64") }));
  assert.equal((await runRow(runId)).status, "queued");
  const done = await call(runId, { position: 1, kind: "activity-collect", name: "t" });
  assert.deepEqual(done.entry.result, { stdout_b64: Buffer.from("hi\n").toString("base64"), exit: 0 });
  await assert.rejects(call(runId, { position: 2, kind: "activity-collect", name: "nope" }), /no activity named "nope"/);
});

const childrenOf = async (runId: string) =>
  (
    await db.pool.query<{ id: string; filename: string; workflow: string; trusted: boolean }>(
      `select id, filename, workflow, trusted from runs where parent_run_id = $1 order by created_at`,
      [runId],
    )
  ).rows;

void test("call: a one-node child graph run, pending until the child ends; a repeat starts no second child; the end wakes the parent", async () => {
  const { runId, jobId } = await newRun();
  const req = { position: 0, kind: "call" as const, args: { node: "emit", config: { type: "x.built" } } };
  const first = await call(runId, req);
  assert.equal(first.status, "pending");
  if (first.status === "pending") assert.deepEqual(first.substate, { name: "call#0", kind: "call" });
  assert.equal((await call(runId, req)).status, "pending");
  const children = await childrenOf(runId);
  assert.deepEqual(
    children.map((c) => [c.filename, c.workflow, c.trusted]),
    [["node:emit", "flowsvc-graph/v1", true]],
  );
  const nodes = await db.pool.query(`select node_id, type from graph_nodes where run_id = $1`, [children[0]!.id]);
  assert.deepEqual(nodes.rows, [{ node_id: "call", type: "emit" }]);
  assert.equal(await withTransaction(db.pool, (tx) => suspendJob(tx, jobId, runId)), "parked");
  const output = { nodes: { call: { event_id: "evt-1" } } };
  await withTransaction(db.pool, (tx) => completeRun(tx, children[0]!.id, { status: "succeeded", output }, undefined));
  assert.equal((await runRow(runId)).status, "queued");
  const replay = await call(runId, req);
  assert.equal(replay.status, "done");
  assert.deepEqual(replay.entry.result, { run_id: children[0]!.id, status: "succeeded", output, error: null });
  assert.equal((await childrenOf(runId)).length, 1);
});

void test("call: a failed child answers its error; a stored graph and a definition are children too", async () => {
  const { runId } = await newRun();
  const doc = { version: "flowsvc-graph/v1", nodes: [{ id: "a", type: "emit", config: { type: "x.y" } }], edges: [] };
  await db.pool.query(`insert into graphs (project_id, name, document, source) values ($1, 'stored', $2, $3)`, [
    projectId,
    JSON.stringify(doc),
    JSON.stringify(doc),
  ]);
  assert.equal((await call(runId, { position: 1, kind: "call", args: { graph: "stored" } })).status, "pending");
  assert.equal(
    (await call(runId, { position: 0, kind: "call", args: { definition: JSON.stringify(doc), input: { n: 1 } } })).status,
    "pending",
  );
  const [child, stored] = (await childrenOf(runId)).sort((a, b) => a.filename.localeCompare(b.filename));
  assert.deepEqual([child!.filename, stored!.filename], ["call.json", "graph:stored"]);
  await withTransaction(db.pool, (tx) => completeRun(tx, child!.id, { status: "failed", error: "node a failed: boom" }, undefined));
  const answer = await call(runId, { position: 0, kind: "call", args: { definition: JSON.stringify(doc), input: { n: 1 } } });
  assert.equal(answer.status, "done");
  assert.deepEqual(answer.entry.result, { run_id: child!.id, status: "failed", output: null, error: "node a failed: boom" });
});

void test("call: a definition with a retry is a child whose source the engine parses again (the backoff in ms)", async () => {
  const { runId } = await newRun();
  const doc = {
    version: "flowsvc-graph/v1",
    nodes: [{ id: "a", type: "emit", config: { type: "x.y" }, retry: { attempts: 2, backoff: "1s" } }],
    edges: [],
  };
  assert.equal((await call(runId, { position: 0, kind: "call", args: { definition: JSON.stringify(doc) } })).status, "pending");
  const [child] = await childrenOf(runId);
  const { rows } = await db.pool.query<{ source: string }>(`select source from runs where id = $1`, [child!.id]);
  const again = parseGraph(JSON.parse(rows[0]!.source));
  assert.ok(again.ok, JSON.stringify(again));
  assert.deepEqual(again.graph.nodes[0]!.retry, { attempts: 2, backoff_ms: 1000 });
});

void test("call: refusals name what was wrong and write nothing", async () => {
  const { runId } = await newRun();
  const refused = async (args: Record<string, unknown>, code: string, message: RegExp): Promise<void> => {
    await assert.rejects(call(runId, { position: 0, kind: "call", args }), (err: Error & { code?: string }) => {
      assert.equal(err.code, code, err.message);
      assert.match(err.message, message);
      return true;
    });
  };
  await refused({ node: "emit", graph: "g" }, "invalid_argument", /give exactly one of node, graph or definition/);
  await refused({}, "invalid_argument", /give exactly one/);
  await refused({ node: "emit", config: { type: "x" }, extra: 1 }, "invalid_argument", /extra/);
  await refused({ graph: "nope" }, "not_found", /graph nope not found/);
  await refused({ definition: '{"version": "flowsvc-graph/v1", "nodes": [' }, "invalid_argument", /line 1/);
  await refused({ node: "http", config: {} }, "invalid_argument", /nodes\[0\]\.config\.url/);
  await refused(
    { node: "http", config: { url: "https://example.test", credential: "absent" } },
    "invalid_argument",
    /node call: credential "absent" is missing/,
  );
  await refused({ node: "emit", config: { type: "x" }, input: { n: Number.POSITIVE_INFINITY } }, "invalid_argument", /input/);
  assert.deepEqual(await childrenOf(runId), []);
  const { rowCount } = await db.pool.query(`select 1 from journal where run_id = $1`, [runId]);
  assert.equal(rowCount, 0);
});
