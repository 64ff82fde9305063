/** emitEvent on a real Postgres: the event row and every delivery it causes, in one transaction. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createTestDatabase, type TestDatabase } from "./testing.js";
import { withTransaction } from "./pool.js";
import { emitEvent, handlerRunId, type EmitInput } from "./emit.js";
import { performCall } from "./calls.js";
import { completeRun } from "./run-lifecycle.js";
import { suspendJob, wakeRun } from "./wake.js";
import { mintId } from "./mint.js";

let db: TestDatabase;

before(async () => {
  db = await createTestDatabase();
});
after(async () => db?.drop());

const newProject = async (): Promise<string> => {
  const org = mintId("org");
  const projectId = mintId("prj");
  await db.pool.query(`insert into orgs (id, name) values ($1, $2)`, [org, org]);
  await db.pool.query(`insert into projects (id, org_id, name) values ($1, $2, 'p')`, [projectId, org]);
  return projectId;
};

const addHandler = (projectId: string, name: string, on: string[], when: string | null = null, credentials: Record<string, string> = {}) =>
  db.pool.query(`insert into handlers (project_id, name, patterns, when_cel, reaction, credentials) values ($1, $2, $3, $4, $5, $6)`, [
    projectId, name, on, when, JSON.stringify({ kind: "script", source: "echo hi\n", filename: "h.sh" }), JSON.stringify(credentials),
  ]);

const emit = (input: Partial<EmitInput> & Pick<EmitInput, "projectId" | "type">) =>
  withTransaction(db.pool, (tx) => emitEvent(tx, { key: null, payload: null, sourceRunId: null, trusted: true, ...input }));

const runsOf = async (projectId: string) =>
  (await db.pool.query<{ id: string; handler_name: string; generation: number; trusted: boolean }>(
    `select id, handler_name, generation, trusted from runs where project_id = $1 and handler_name is not null order by handler_name`,
    [projectId],
  )).rows;

void test("every matching handler gets its own run, with an id derived from the event and the handler", async () => {
  const p = await newProject();
  await addHandler(p, "exact", ["deploy.done"]);
  await addHandler(p, "prefix", ["deploy.*"]);
  await addHandler(p, "all", ["*"]);
  await addHandler(p, "other", ["build.*"]);
  const r = await emit({ projectId: p, type: "deploy.done", payload: { n: 1 } });
  assert.equal(r.handlerRuns.length, 3);
  const runs = await runsOf(p);
  assert.deepEqual(runs.map((x) => x.handler_name), ["all", "exact", "prefix"]);
  for (const run of runs) assert.equal(run.id, handlerRunId(r.eventId, run.handler_name));
  const jobs = await db.pool.query<{ capabilities: string[] }>(`select capabilities from jobs where run_id = any($1)`, [runs.map((x) => x.id)]);
  assert.ok(jobs.rows.every((j) => j.capabilities.includes("polyglot")), "script handlers need the polyglot capability");
});

void test("a when that reads an absent field declines (reported), and a has() guard makes it match only when present", async () => {
  const p = await newProject();
  await addHandler(p, "absent", ["e"], "event.payload.missing == 1");
  await addHandler(p, "guarded", ["e"], "has(event.payload.x) && event.payload.x > 1");
  const first = await emit({ projectId: p, type: "e", payload: { y: 1 } });
  assert.deepEqual(first.handlerRuns, []);
  assert.equal(first.declined.length, 1);
  assert.equal(first.declined[0]!.handler, "absent");
  const second = await emit({ projectId: p, type: "e", payload: { x: 2, missing: 1 } });
  assert.equal(second.handlerRuns.length, 2);
});

void test("custom emits from handler runs chain one generation deeper and stop after five", async () => {
  const p = await newProject();
  await addHandler(p, "loop", ["chain"]);
  let source: string | null = null;
  for (let generation = 1; generation <= 5; generation++) {
    const r = await emit({ projectId: p, type: "chain", sourceRunId: source });
    assert.equal(r.handlerRuns.length, 1);
    source = r.handlerRuns[0]!;
    await db.pool.query(`update runs set status = 'succeeded' where id = $1`, [source]); // drain the backlog
  }
  const events = async () => Number((await db.pool.query<{ n: string }>(`select count(*) as n from events where project_id = $1`, [p])).rows[0]!.n);
  const before = await events();
  await assert.rejects(emit({ projectId: p, type: "chain", sourceRunId: source }), /generation 6 of a handler chain; chains stop at 5/);
  assert.equal(await events(), before, "a refused emit records nothing");
  assert.deepEqual((await runsOf(p)).map((r) => r.generation).sort(), [1, 2, 3, 4, 5]);
});

void test("over 16 handler runs in flight the emit fails and records nothing; a platform event is recorded without them", async () => {
  const p = await newProject();
  await addHandler(p, "slow", ["work"]);
  for (let i = 0; i < 16; i++) await emit({ projectId: p, type: "work" });
  await assert.rejects(emit({ projectId: p, type: "work" }), /16 handler runs are in flight in this project \(at most 16\)/);
  assert.equal((await runsOf(p)).length, 16);
  await addHandler(p, "watcher", ["run.failed"]);
  const platform = await emit({ projectId: p, type: "run.failed", platform: true });
  assert.deepEqual(platform.handlerRuns, []);
  assert.deepEqual(platform.dropped, ["watcher"]);
});

void test("a forge redelivery answers the same event and delivers nothing twice; untrusted events skip handlers with credentials", async () => {
  const p = await newProject();
  await addHandler(p, "plain", ["gh.push"]);
  await addHandler(p, "deployer", ["gh.push"], null, { TOKEN: "deploy-token" });
  const first = await emit({ projectId: p, type: "gh.push", hookName: "gh", deliveryId: "d-1", trusted: false });
  const again = await emit({ projectId: p, type: "gh.push", hookName: "gh", deliveryId: "d-1", trusted: false });
  assert.equal(again.eventId, first.eventId);
  assert.equal(again.duplicate, true);
  const runs = await runsOf(p);
  assert.deepEqual(runs.map((r) => [r.handler_name, r.trusted]), [["plain", false]]);
});

void test("wait-event takes the next event of its type after it began, not an earlier one; a handler run's own lifecycle events are not delivered", async () => {
  const p = await newProject();
  const runId = mintId("run");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger) values ($1, $2, 'flowsvc/script/v1', 'running', '', 's.sh', '{bash}', '{}')`,
    [runId, p],
  );
  await emit({ projectId: p, type: "ready", payload: "early" });
  const wait = await withTransaction(db.pool, (tx) => performCall(tx, runId, { position: 0, kind: "wait-event", name: "ready", ordinal: 0, args: {} }));
  assert.equal(wait.status, "pending");
  const later = await emit({ projectId: p, type: "ready", payload: "later" });
  const done = await withTransaction(db.pool, (tx) => performCall(tx, runId, { position: 0, kind: "wait-event", name: "ready", ordinal: 0, args: {} }));
  assert.equal(done.status, "done");
  assert.deepEqual((done.entry.result as { envelope: unknown }).envelope, { type: "ready", event: later.eventId, payload: "later" });

  await addHandler(p, "on-runs", ["run.*"]);
  const h = await emit({ projectId: p, type: "ready" });
  assert.equal(h.handlerRuns.length, 0);
  const handlerRun = (await emit({ projectId: p, type: "other" })).handlerRuns;
  assert.deepEqual(handlerRun, []);
  await addHandler(p, "worker", ["job"]);
  const [workerRun] = (await emit({ projectId: p, type: "job" })).handlerRuns;
  await withTransaction(db.pool, (tx) => completeRun(tx, workerRun!, { status: "succeeded", output: {} }, undefined));
  assert.deepEqual((await runsOf(p)).map((r) => r.handler_name), ["worker"], "the worker's run.succeeded did not start on-runs");
});

void test("a handler run that parks and wakes gets its next job with the polyglot capability it needs", async () => {
  const p = await newProject();
  await addHandler(p, "sleeper", ["nap"]);
  const [runId] = (await emit({ projectId: p, type: "nap" })).handlerRuns;
  const { rows } = await db.pool.query<{ id: string }>(`select id from jobs where run_id = $1`, [runId]);
  await db.pool.query(`update jobs set status = 'running' where run_id = $1`, [runId]);
  await db.pool.query(`update runs set status = 'running' where id = $1`, [runId]);
  await withTransaction(db.pool, (tx) => performCall(tx, runId!, { position: 0, kind: "sleep", name: "", ordinal: 0, args: { duration_ms: 60_000 } }));
  assert.equal(await withTransaction(db.pool, (tx) => suspendJob(tx, rows[0]!.id, runId!)), "parked");
  assert.equal(await withTransaction(db.pool, (tx) => wakeRun(tx, runId!)), "queued");
  const next = await db.pool.query<{ capabilities: string[] }>(`select capabilities from jobs where run_id = $1 and status = 'queued'`, [runId]);
  assert.deepEqual(next.rows.map((j) => j.capabilities), [["polyglot"]]);
});
