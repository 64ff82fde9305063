/**
 * Untrusted is contagious (core/src/trust.ts), on a real Postgres: whatever an untrusted run
 * causes is untrusted, and `trusted` has no default for a forgotten insert to fall back on.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { SCRIPT_WORKFLOW, type CallRequest, type RunRequest } from "@flowsvc/core";
import { createTestDatabase, createTestProject, type TestDatabase } from "./testing.js";
import { withTransaction } from "./pool.js";
import { performCall } from "./calls.js";
import { emitEvent } from "./emit.js";
import { completeRun, createRun } from "./run-lifecycle.js";
import { createRerun } from "./rerun.js";
import { recordJournal } from "./journal.js";
import { suspendJob } from "./wake.js";
import { mintId } from "./mint.js";

let db: TestDatabase;
let userId: string;

before(async () => {
  db = await createTestDatabase();
  userId = mintId("usr");
  await db.pool.query(`insert into users (id, name) values ($1, $2)`, [userId, userId]);
});
after(async () => db?.drop());

const newProject = async (): Promise<string> => (await createTestProject(db.pool)).projectId;

/** A running script run (not a handler run, so its run.* events are delivered), with its running job. */
const newRun = async (projectId: string, trusted: boolean): Promise<{ runId: string; jobId: string }> => {
  const runId = mintId("run");
  const jobId = mintId("job");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted)
     values ($1, $2, 'flowsvc/script/v1', 'running', 'echo hi', 's.sh', '{bash}', '{}', $3)`,
    [runId, projectId, trusted],
  );
  await db.pool.query(`insert into jobs (id, run_id, status) values ($1, $2, 'running')`, [jobId, runId]);
  return { runId, jobId };
};

const addHandler = (projectId: string, name: string, on: string[], credentials: Record<string, string> = {}) =>
  db.pool.query(`insert into handlers (project_id, name, patterns, reaction, credentials) values ($1, $2, $3, $4, $5)`, [
    projectId,
    name,
    on,
    JSON.stringify({ kind: "script", source: "echo hi\n", filename: "h.sh" }),
    JSON.stringify(credentials),
  ]);

const call = (runId: string, req: Partial<CallRequest> & Pick<CallRequest, "position" | "kind">) =>
  withTransaction(db.pool, (tx) => performCall(tx, runId, { name: "", ordinal: 0, args: {}, ...req }));

const runTrust = async (runId: string): Promise<boolean> =>
  (await db.pool.query<{ trusted: boolean }>(`select trusted from runs where id = $1`, [runId])).rows[0]!.trusted;

const eventTrust = async (eventId: string): Promise<boolean> =>
  (await db.pool.query<{ trusted: boolean }>(`select trusted from events where id = $1`, [eventId])).rows[0]!.trusted;

/** Every handler run in the project, as [handler, trusted]. */
const handlerRuns = async (projectId: string): Promise<Array<[string, boolean]>> =>
  (
    await db.pool.query<{ handler_name: string; trusted: boolean }>(
      `select handler_name, trusted from runs where project_id = $1 and handler_name is not null order by handler_name, created_at`,
      [projectId],
    )
  ).rows.map((r) => [r.handler_name, r.trusted]);

/** The events a run caused, as [type, trusted], in order. */
const eventsFrom = async (runId: string): Promise<Array<[string, boolean]>> =>
  (
    await db.pool.query<{ type: string; trusted: boolean }>(`select type, trusted from events where source_run_id = $1 order by seq`, [
      runId,
    ])
  ).rows.map((r) => [r.type, r.trusted]);

const spawn = async (runId: string, position = 0): Promise<string> => {
  const r = await call(runId, { position, kind: "spawn", args: { source: "echo child\n", filename: "child.sh" } });
  return (r.entry.result as { run_id: string }).run_id;
};

for (const trusted of [false, true]) {
  const what = trusted ? "trusted" : "untrusted";
  const a = trusted ? "a" : "an";

  void test(`${a} ${what} run's spawned child is ${what}, and so are its spawn event and the handler runs that event starts`, async () => {
    const p = await newProject();
    await addHandler(p, "on-spawn", ["spawn"]);
    const { runId } = await newRun(p, trusted);
    const child = await spawn(runId);
    assert.equal(await runTrust(child), trusted);
    assert.deepEqual(await eventsFrom(runId), [["spawn", trusted]]);
    assert.deepEqual(await handlerRuns(p), [["on-spawn", trusted]]);
    // The child passes it on: a grandchild of an untrusted run is untrusted too.
    const grandchild = await spawn(child);
    assert.equal(await runTrust(grandchild), trusted);
  });

  void test(`${a} ${what} run's flow emit records ${a} ${what} event, and the handler runs it starts are ${what}`, async () => {
    const p = await newProject();
    await addHandler(p, "on-deploy", ["deploy.*"]);
    // A handler with a credential serves only trusted events: an untrusted run cannot reach it by emitting.
    await addHandler(p, "deployer", ["deploy.*"], { DEPLOY_TOKEN: "deploy-cred" });
    const { runId } = await newRun(p, trusted);
    const r = await call(runId, { position: 0, kind: "emit", args: { type: "deploy.requested", payload: { sha: "abc" } } });
    assert.equal(r.status, "done");
    assert.equal(await eventTrust((r.entry.result as { event_id: string }).event_id), trusted);
    assert.deepEqual(
      await handlerRuns(p),
      trusted
        ? [
            ["deployer", true],
            ["on-deploy", true],
          ]
        : [["on-deploy", false]],
    );
  });

  void test(`${a} ${what} run's run.* events are ${what}, and so are the handler runs they feed`, async () => {
    const p = await newProject();
    await addHandler(p, "watcher", ["run.*"]);
    const { runId } = await newRun(p, trusted);
    assert.equal(await withTransaction(db.pool, (tx) => completeRun(tx, runId, { status: "failed", error: "boom" }, undefined)), true);
    assert.deepEqual(await eventsFrom(runId), [["run.failed", trusted]]);
    assert.deepEqual(await handlerRuns(p), [["watcher", trusted]]);
  });

  void test(`flow rerun of ${a} ${what} run is ${what}, even at a person's request`, async () => {
    const p = await newProject();
    const { runId } = await newRun(p, trusted);
    await recordJournal(db.pool, runId, {
      position: 0,
      kind: "step",
      name: "build",
      ordinal: 0,
      status: "done",
      result: { exit: 0, stdout_b64: "" },
    });
    await recordJournal(db.pool, runId, {
      position: 1,
      kind: "step",
      name: "deploy",
      ordinal: 0,
      status: "done",
      result: { exit: 0, stdout_b64: "" },
    });
    await db.pool.query(`update runs set status = 'succeeded' where id = $1`, [runId]);
    const rerun = await withTransaction(db.pool, (tx) => createRerun(tx, { projectId: p, runId, site: "deploy", createdBy: userId }));
    assert.equal(await runTrust(rerun), trusted);
  });
}

void test("a trusted run whose flow wait-event receives an untrusted event is untrusted from then on; a trusted event leaves it trusted", async () => {
  const p = await newProject();
  const waiter = async () => {
    const { runId, jobId } = await newRun(p, true);
    assert.equal((await call(runId, { position: 0, kind: "wait-event", name: "pr.opened" })).status, "pending");
    assert.equal(await withTransaction(db.pool, (tx) => suspendJob(tx, jobId, runId)), "parked");
    return runId;
  };
  const receivesTrusted = await waiter();
  await withTransaction(db.pool, (tx) =>
    emitEvent(tx, { projectId: p, type: "pr.opened", key: null, payload: { n: 1 }, sourceRunId: null, trusted: true }),
  );
  assert.equal(await runTrust(receivesTrusted), true);

  const receivesUntrusted = await waiter();
  const { runId: untrustedRun } = await newRun(p, false);
  // An untrusted run's emit is the laundering path this closes: the event it records is untrusted.
  await call(untrustedRun, { position: 0, kind: "emit", args: { type: "pr.opened", payload: { n: 2 } } });
  assert.equal(await runTrust(receivesUntrusted), false, "the wait resolved and took the event's trust with it");
  const replay = await call(receivesUntrusted, { position: 0, kind: "wait-event", name: "pr.opened" });
  assert.deepEqual((replay.entry.result as { envelope: { payload: unknown } }).envelope.payload, { n: 2 });
  assert.equal((await db.pool.query(`select 1 from runs where id = $1 and status = 'queued'`, [receivesUntrusted])).rowCount, 1, "woken");

  // Untrusted from then on: what it causes afterwards is untrusted, and a later trusted event does not restore it.
  assert.equal(await runTrust(await spawn(receivesUntrusted, 1)), false);
  assert.equal(await runTrust(receivesTrusted), true, "a waiter the untrusted event did not reach is unchanged");
});

void test("a pass claimed while trusted never gets the untrusted event that took its trust, even asking again after a lost answer", async () => {
  const p = await newProject();
  const { runId, jobId } = await newRun(p, true);
  const waitCall = { position: 0, kind: "wait-event", name: "pr.opened" } as const;
  assert.equal((await call(runId, waitCall)).status, "pending");
  // The agent never heard that answer (the server died after its commit), so the pass is still running.
  const { runId: untrustedRun } = await newRun(p, false);
  await call(untrustedRun, { position: 0, kind: "emit", args: { type: "pr.opened", payload: { marker: "from-the-fork" } } });
  assert.equal(await runTrust(runId), false);

  const retried = await call(runId, waitCall);
  assert.equal(retried.status, "pending", "the pass holding the secrets is told to park");
  assert.equal(JSON.stringify(retried).includes("from-the-fork"), false, JSON.stringify(retried));
  assert.equal(await withTransaction(db.pool, (tx) => suspendJob(tx, jobId, runId)), "requeued");

  // The next pass is claimed untrusted (no secrets) and gets the envelope.
  await db.pool.query(`update jobs set status = 'running' where run_id = $1 and status = 'queued'`, [runId]);
  const replay = await call(runId, waitCall);
  assert.equal(replay.status, "done");
  assert.deepEqual((replay.entry.result as { envelope: { payload: unknown } }).envelope.payload, { marker: "from-the-fork" });
});

void test("a run or event insert that leaves out trusted is refused by Postgres: the column has no default", async () => {
  const p = await newProject();
  const defaults = await db.pool.query<{ table_name: string; column_default: string | null; is_nullable: string }>(
    `select table_name, column_default, is_nullable from information_schema.columns where column_name = 'trusted' and table_name in ('runs', 'events') order by table_name`,
  );
  assert.deepEqual(defaults.rows, [
    { table_name: "events", column_default: null, is_nullable: "NO" },
    { table_name: "runs", column_default: null, is_nullable: "NO" },
  ]);
  await assert.rejects(
    db.pool.query(
      `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger) values ($1, $2, 'flowsvc/script/v1', 'queued', '', 's.sh', '{bash}', '{}')`,
      [mintId("run"), p],
    ),
    /null value in column "trusted" of relation "runs" violates not-null constraint/,
  );
  await assert.rejects(
    db.pool.query(`insert into events (id, project_id, type) values ($1, $2, 'x')`, [mintId("evt"), p]),
    /null value in column "trusted" of relation "events" violates not-null constraint/,
  );
});

void test("createRun takes trusted as a required field, and writes what it is given", async () => {
  const p = await newProject();
  const run = (trusted: boolean): RunRequest => ({
    id: mintId("run"),
    projectId: p,
    workflow: SCRIPT_WORKFLOW,
    source: "",
    filename: "s.sh",
    interpreter: ["bash"],
    env: {},
    tags: [],
    trigger: {},
    idempotencyKey: null,
    createdBy: null,
    trusted,
  });
  // Compile-time half: a RunRequest without trusted does not typecheck (an unused expect-error fails the build).
  // @ts-expect-error trusted is required
  const missing: RunRequest = {
    id: "x",
    projectId: p,
    workflow: SCRIPT_WORKFLOW,
    source: "",
    filename: "s.sh",
    interpreter: [],
    env: {},
    tags: [],
    trigger: {},
    idempotencyKey: null,
    createdBy: null,
  };
  assert.equal("trusted" in missing, false);
  for (const trusted of [false, true]) {
    const r = await withTransaction(db.pool, (tx) => createRun(tx, run(trusted)));
    assert.equal(await runTrust(r.id), trusted);
  }
});
