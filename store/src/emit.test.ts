/** emitEvent on a real Postgres: the event row and every delivery it causes, in one transaction. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "@flowsvc/core";
import { createTestDatabase, createTestProject, waitFor, type TestDatabase } from "./testing.js";
import { withTransaction } from "./pool.js";
import { StaleHookError, emitBatch, emitEvent, emitEvents, handlerRunId, type EmitInput, type EmitResult } from "./emit.js";
import { GroupCommitter } from "./group-commit.js";
import { performCall } from "./calls.js";
import { completeRun } from "./run-lifecycle.js";
import { suspendJob, wakeRun } from "./wake.js";
import { mintId } from "./mint.js";

let db: TestDatabase;

before(async () => {
  db = await createTestDatabase();
});
after(async () => db?.drop());

const newProject = async (): Promise<string> => (await createTestProject(db.pool)).projectId;

/** A script run that is running, to make durable calls from (a waiter). */
const newRunningScript = async (projectId: string): Promise<string> => {
  const runId = mintId("run");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted) values ($1, $2, 'flowsvc/script/v1', 'running', '', 's.sh', '{bash}', '{}', true)`,
    [runId, projectId],
  );
  return runId;
};

/** A script handler on `on`, with a CEL guard and credentials when given. */
const addHandler = (
  projectId: string,
  name: string,
  on: string[],
  { when = null, credentials = {} }: { when?: string | null; credentials?: Record<string, string> } = {},
) =>
  db.pool.query(`insert into handlers (project_id, name, patterns, when_cel, reaction, credentials) values ($1, $2, $3, $4, $5, $6)`, [
    projectId,
    name,
    on,
    when,
    JSON.stringify({ kind: "script", source: "echo hi\n", filename: "h.sh" }),
    JSON.stringify(credentials),
  ]);

const emit = (input: Partial<EmitInput> & Pick<EmitInput, "projectId" | "type">) =>
  withTransaction(db.pool, (tx) => emitEvent(tx, { key: null, payload: null, sourceRunId: null, trusted: true, ...input }));

/** Waits until a session of this database waits for a lock (pg_stat_activity), for up to 10 s. */
const waitForLockWait = async (): Promise<void> => {
  const count = async () =>
    (
      await db.pool.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
      )
    ).rows[0]!.n;
  await waitFor("a session waiting for a lock", async () => (await count()) > 0, 10_000, 10);
};

const runsOf = async (projectId: string) =>
  (
    await db.pool.query<{ id: string; handler_name: string; generation: number; trusted: boolean }>(
      `select id, handler_name, generation, trusted from runs where project_id = $1 and handler_name is not null order by handler_name`,
      [projectId],
    )
  ).rows;

void test("every matching handler gets its own run, with an id derived from the event and the handler", async () => {
  const p = await newProject();
  await addHandler(p, "exact", ["deploy.done"]);
  await addHandler(p, "prefix", ["deploy.*"]);
  await addHandler(p, "all", ["*"]);
  await addHandler(p, "other", ["build.*"]);
  const r = await emit({ projectId: p, type: "deploy.done", payload: { n: 1 } });
  assert.equal(r.handlerRuns.length, 3);
  const runs = await runsOf(p);
  assert.deepEqual(
    runs.map((x) => x.handler_name),
    ["all", "exact", "prefix"],
  );
  for (const run of runs) assert.equal(run.id, handlerRunId(r.eventId, run.handler_name));
  const jobs = await db.pool.query<{ capabilities: string[] }>(`select capabilities from jobs where run_id = any($1)`, [
    runs.map((x) => x.id),
  ]);
  assert.ok(
    jobs.rows.every((j) => j.capabilities.includes("polyglot")),
    "script handlers need the polyglot capability",
  );
});

void test("a when that reads an absent field declines (reported), and a has() guard makes it match only when present", async () => {
  const p = await newProject();
  await addHandler(p, "absent", ["e"], { when: "event.payload.missing == 1" });
  await addHandler(p, "guarded", ["e"], { when: "has(event.payload.x) && event.payload.x > 1" });
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
  const events = async () =>
    Number((await db.pool.query<{ n: string }>(`select count(*) as n from events where project_id = $1`, [p])).rows[0]!.n);
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

void test("concurrent emits never pass the in-flight limit together: of 12 at once with 10 in flight, exactly 6 start a run", async () => {
  const p = await newProject();
  await addHandler(p, "slow", ["work"]);
  for (let i = 0; i < 10; i++) await emit({ projectId: p, type: "work" });
  const outcomes = await Promise.allSettled(Array.from({ length: 12 }, () => emit({ projectId: p, type: "work" })));
  const refused = outcomes.filter((o) => o.status === "rejected");
  assert.equal(refused.length, 6, outcomes.map((o) => o.status).join(" "));
  for (const o of refused) assert.match(String(o.reason), /handler runs are in flight in this project \(at most 16\)/);
  assert.equal((await runsOf(p)).length, 16);
});

void test("a forge redelivery answers the same event and delivers nothing twice; untrusted events skip handlers with credentials", async () => {
  const p = await newProject();
  await addHandler(p, "plain", ["gh.push"]);
  await addHandler(p, "deployer", ["gh.push"], { credentials: { TOKEN: "deploy-token" } });
  const first = await emit({ projectId: p, type: "gh.push", hookName: "gh", deliveryId: "d-1", trusted: false });
  const again = await emit({ projectId: p, type: "gh.push", hookName: "gh", deliveryId: "d-1", trusted: false });
  assert.equal(again.eventId, first.eventId);
  assert.equal(again.duplicate, true);
  const runs = await runsOf(p);
  assert.deepEqual(
    runs.map((r) => [r.handler_name, r.trusted]),
    [["plain", false]],
  );
});

void test("wait-event takes the next event of its type after it began, not an earlier one; a handler run's own lifecycle events are not delivered", async () => {
  const p = await newProject();
  const runId = await newRunningScript(p);
  await emit({ projectId: p, type: "ready", payload: "early" });
  const wait = await withTransaction(db.pool, (tx) =>
    performCall(tx, runId, { position: 0, kind: "wait-event", name: "ready", ordinal: 0, args: {} }),
  );
  assert.equal(wait.status, "pending");
  const later = await emit({ projectId: p, type: "ready", payload: "later" });
  const done = await withTransaction(db.pool, (tx) =>
    performCall(tx, runId, { position: 0, kind: "wait-event", name: "ready", ordinal: 0, args: {} }),
  );
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
  assert.deepEqual(
    (await runsOf(p)).map((r) => r.handler_name),
    ["worker"],
    "the worker's run.succeeded did not start on-runs",
  );
});

void test("a handler run that parks and wakes gets its next job with the polyglot capability it needs", async () => {
  const p = await newProject();
  await addHandler(p, "sleeper", ["nap"]);
  const [runId] = (await emit({ projectId: p, type: "nap" })).handlerRuns;
  const { rows } = await db.pool.query<{ id: string }>(`select id from jobs where run_id = $1`, [runId]);
  await db.pool.query(`update jobs set status = 'running' where run_id = $1`, [runId]);
  await db.pool.query(`update runs set status = 'running' where id = $1`, [runId]);
  await withTransaction(db.pool, (tx) =>
    performCall(tx, runId!, { position: 0, kind: "sleep", name: "", ordinal: 0, args: { duration_ms: 60_000 } }),
  );
  assert.equal(await withTransaction(db.pool, (tx) => suspendJob(tx, rows[0]!.id, runId!)), "parked");
  assert.equal(await withTransaction(db.pool, (tx) => wakeRun(tx, runId!)), "queued");
  const next = await db.pool.query<{ capabilities: string[] }>(`select capabilities from jobs where run_id = $1 and status = 'queued'`, [
    runId,
  ]);
  assert.deepEqual(
    next.rows.map((j) => j.capabilities),
    [["polyglot"]],
  );
});

const base = { key: null, payload: null, sourceRunId: null, trusted: true } as const;

void test("a batch records each event once: a redelivery in the same batch or an earlier one answers the first delivery's event", async () => {
  const p = await newProject();
  const q = await newProject();
  await addHandler(p, "gh", ["gh.push"]);
  const earlier = await emit({ projectId: p, type: "gh.push", hookName: "gh", deliveryId: "d-0" });
  const results = await withTransaction(db.pool, (tx) =>
    emitEvents(tx, [
      { ...base, projectId: p, type: "gh.push", hookName: "gh", deliveryId: "d-1", payload: { n: 1 } },
      { ...base, projectId: q, type: "other", payload: { n: 2 } },
      { ...base, projectId: p, type: "gh.push", hookName: "gh", deliveryId: "d-1", payload: { n: 3 } },
      { ...base, projectId: p, type: "gh.push", hookName: "gh", deliveryId: "d-0" },
    ]),
  );
  assert.deepEqual(
    results.map((r) => r.duplicate),
    [false, false, true, true],
  );
  assert.equal(results[2]!.eventId, results[0]!.eventId);
  assert.equal(results[3]!.eventId, earlier.eventId);
  assert.equal(results[0]!.handlerRuns.length, 1);
  assert.deepEqual(results[2]!.handlerRuns, [], "a redelivery starts nothing");
  const rows = (
    await db.pool.query<{ id: string; payload: unknown }>(`select id, payload from events where project_id = $1 order by seq`, [p])
  ).rows;
  assert.deepEqual(
    rows.map((r) => r.payload),
    [null, { n: 1 }],
    "one row per delivery; the first delivery's payload stands",
  );
  assert.equal((await runsOf(p)).length, 2);
});

void test("an event is recorded only against the hook it was verified with: a changed, removed or re-created hook is stale", async () => {
  const p = await newProject();
  const setHook = async (): Promise<string> =>
    (
      await db.pool.query<{ rev: string }>(
        `insert into event_hooks (project_id, name, mode, event_type, secret_digest) values ($1, 'h', 'token', 'h.e', '\\x00') returning rev`,
        [p],
      )
    ).rows[0]!.rev;
  const deliver = (hookRev: string) => emit({ projectId: p, type: "h.e", hookName: "h", hookRev });
  const rev = await setHook();
  await deliver(rev);
  const rotated = (
    await db.pool.query<{ rev: string }>(`update event_hooks set secret_digest = '\\x01' where project_id = $1 returning rev`, [p])
  ).rows[0]!.rev;
  assert.notEqual(rotated, rev);
  await assert.rejects(deliver(rev), (err: unknown) => err instanceof StaleHookError && err.hookName === "h");
  await deliver(rotated);
  await db.pool.query(`delete from event_hooks where project_id = $1`, [p]);
  await assert.rejects(deliver(rotated), StaleHookError);
  const again = await setHook();
  assert.notEqual(again, rotated, "a hook removed and set again does not take its old rev back");
  await assert.rejects(deliver(rotated), StaleHookError);
  const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from events where project_id = $1`, [p]);
  assert.equal(rows[0]!.n, 2, "nothing was recorded for the stale deliveries");
});

void test("handlers set, changed or removed between emits are seen by the next emit", async () => {
  const p = await newProject();
  assert.deepEqual((await emit({ projectId: p, type: "x" })).handlerRuns, []);
  await addHandler(p, "h", ["x"]);
  assert.equal((await emit({ projectId: p, type: "x" })).handlerRuns.length, 1);
  await db.pool.query(`update handlers set patterns = '{y}' where project_id = $1`, [p]);
  assert.deepEqual((await emit({ projectId: p, type: "x" })).handlerRuns, []);
  assert.equal((await emit({ projectId: p, type: "y" })).handlerRuns.length, 1);
  await db.pool.query(`delete from handlers where project_id = $1`, [p]);
  assert.deepEqual((await emit({ projectId: p, type: "y" })).handlerRuns, []);
});

void test("a waiter that begins while an emit of its type is uncommitted waits for that commit, and then counts the event as before it", async () => {
  const p = await newProject();
  const runId = await newRunningScript(p);
  const emitter = await db.pool.connect();
  try {
    await emitter.query("begin");
    const [inFlight] = await emitEvents(emitter, [{ ...base, projectId: p, type: "ready", payload: "in flight" }]);
    let waited = false;
    const wait = withTransaction(db.pool, (tx) =>
      performCall(tx, runId, { position: 0, kind: "wait-event", name: "ready", ordinal: 0, args: {} }),
    ).then((r) => {
      waited = true;
      return r;
    });
    // The waiter's backend is blocked on a lock the uncommitted emit holds (a condition, not a sleep).
    await waitForLockWait();
    assert.equal(
      waited,
      false,
      "the waiter does not note the bus position while an emit of its type is between its sequence number and its commit",
    );
    await emitter.query("commit");
    assert.equal((await wait).status, "pending");
    const { rows } = await db.pool.query<{ after_seq: string; seq: string }>(
      `select j.args->>'after_seq' as after_seq, (select seq from events where id = $2)::text as seq from journal j where j.run_id = $1`,
      [runId, inFlight!.eventId],
    );
    assert.ok(BigInt(rows[0]!.after_seq) >= BigInt(rows[0]!.seq), "the committed event is before the wait");
  } finally {
    emitter.release();
  }
  const next = await emit({ projectId: p, type: "ready", payload: "next" });
  const done = await withTransaction(db.pool, (tx) =>
    performCall(tx, runId, { position: 0, kind: "wait-event", name: "ready", ordinal: 0, args: {} }),
  );
  assert.equal(done.status, "done");
  assert.equal((done.entry.result as { envelope: { event: string } }).envelope.event, next.eventId);
});

void test("an event with a NUL character is refused with a clear error, whoever emits it, and nothing is recorded", async () => {
  const p = await newProject();
  await assert.rejects(emit({ projectId: p, type: "nul", payload: { text: "a\u0000b" } }), (err: unknown) => {
    assert.ok(err instanceof FlowError && err.code === "invalid_argument", String(err));
    assert.match(err.message, /NUL characters \(\\u0000\), which the event bus cannot store; nothing was recorded/);
    return true;
  });
  await assert.rejects(emit({ projectId: p, type: "nul", fields: { ref: "x\u0000" } }), /NUL characters/);
  const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from events where project_id = $1`, [p]);
  assert.equal(rows[0]!.n, 0);
});

/** Emits through a GroupCommitter set up as hook ingest sets it up; how many of its batches went in one round trip. */
const ingestCommitter = () =>
  new GroupCommitter<EmitInput, EmitResult>(db.pool, emitBatch.apply, { begin: emitBatch.begin, alone: emitBatch.alone });

const eventCount = async (projectId: string): Promise<number> =>
  (await db.pool.query<{ n: number }>(`select count(*)::int as n from events where project_id = $1`, [projectId])).rows[0]!.n;

void test("a batch that is only its event rows commits in one round trip; whatever needs more goes the transactional way, nothing doubled", async () => {
  const p = await newProject();
  const gc = ingestCommitter();
  const hookRev = (
    await db.pool.query<{ rev: string }>(
      `insert into event_hooks (project_id, name, mode, event_type, secret_digest) values ($1, 'h', 'token', 'e', '\\x00') returning rev`,
      [p],
    )
  ).rows[0]!.rev;
  const input = (over: Partial<EmitInput> = {}): EmitInput => ({ ...base, projectId: p, type: "e", hookName: "h", hookRev, ...over });
  // Nothing known of the project's handlers yet: the first batch reads them in a transaction.
  const first = await gc.submit(input({ payload: { n: 0 } }));
  assert.equal(gc.stats.alone, 0);
  const [a, b] = await Promise.all([gc.submit(input({ payload: { n: 1 } })), gc.submit(input({ payload: { n: 2 } }))]);
  // Submitted together, they may share a batch (the second waits for the first's turn of the event loop).
  assert.equal(gc.stats.alone, gc.stats.batches - 1, "no handler takes `e`: each batch since the first in one statement, commit included");
  const alone = gc.stats.alone;
  const { rows } = await db.pool.query<{ id: string; payload: unknown; generation: number; trusted: boolean; hook_name: string }>(
    `select id, payload, generation, trusted, hook_name from events where project_id = $1 order by payload->>'n'`,
    [p],
  );
  // Two batches in flight at once commit in either order: the rows are compared by payload.
  assert.deepEqual(
    rows.map((r) => [r.id, r.payload, r.generation, r.trusted, r.hook_name]),
    [first, a, b].map((r, n) => [r.eventId, { n }, 0, true, "h"]),
  );

  // A handler set since: declined, written by emitEvents (the handler's run started), alone again once it is known not to take the type.
  await addHandler(p, "on-e", ["e"]);
  const handled = await gc.submit(input());
  assert.equal(handled.handlerRuns.length, 1);
  await db.pool.query(`update handlers set patterns = '{other}' where project_id = $1`, [p]);
  assert.deepEqual((await gc.submit(input())).handlerRuns, []);
  await gc.submit(input());
  assert.equal(gc.stats.alone, alone + 1);

  // A redelivery: declined (the first is in), answered with the first delivery's event.
  const once = await gc.submit(input({ deliveryId: "d-1" }));
  assert.equal(gc.stats.alone, alone + 2);
  const twice = await gc.submit(input({ deliveryId: "d-1" }));
  assert.deepEqual([twice.duplicate, twice.eventId], [true, once.eventId]);
  assert.equal(gc.stats.alone, alone + 2);

  // The hook rotated since it was verified: declined, and the transactional way says it is stale.
  await db.pool.query(`update event_hooks set secret_digest = '\\x01' where project_id = $1`, [p]);
  const before = await eventCount(p);
  await assert.rejects(gc.submit(input()), StaleHookError);
  assert.equal(await eventCount(p), before, "nothing recorded against the old hook");

  // A parked waiter of the type gets the event; a live run that lists the type in cancel_on is cancelled.
  const waiter = await newRunningScript(p);
  await withTransaction(db.pool, (tx) => performCall(tx, waiter, { position: 0, kind: "wait-event", name: "e", ordinal: 0, args: {} }));
  const doomed = await newRunningScript(p);
  await db.pool.query(`update runs set cancel_on = '{e}' where id = $1`, [doomed]);
  const woke = await gc.submit({ ...base, projectId: p, type: "e", payload: "for the waiter" });
  const done = await withTransaction(db.pool, (tx) =>
    performCall(tx, waiter, { position: 0, kind: "wait-event", name: "e", ordinal: 0, args: {} }),
  );
  assert.equal((done.entry.result as { envelope: { event: string } }).envelope.event, woke.eventId);
  assert.equal((await db.pool.query<{ status: string }>(`select status from runs where id = $1`, [doomed])).rows[0]!.status, "cancelled");
  assert.equal(gc.stats.alone, alone + 2, "none of these went alone");
  await gc.close();
});

void test("each probe of the one-statement record declines on its own, and only for its own project (migration 023's per-row lookups)", async () => {
  const [p, q] = [await newProject(), await newProject()];
  const gc = ingestCommitter();
  const emit = (projectId: string, type: string) => gc.submit({ ...base, projectId, type });
  await emit(p, "warm");
  await emit(q, "warm"); // both projects' handlers known now: none
  const alone = () => gc.stats.alone;
  // A waiter parked in q on `w`: p's `w` still goes alone, q's does not (and the waiter gets it).
  const waiter = await newRunningScript(q);
  const wait = () =>
    withTransaction(db.pool, (tx) => performCall(tx, waiter, { position: 0, kind: "wait-event", name: "w", ordinal: 0, args: {} }));
  assert.equal((await wait()).status, "pending");
  let before = alone();
  await emit(p, "w");
  assert.equal(alone(), before + 1, "another project's waiter does not decline");
  const woke = await emit(q, "w");
  assert.equal(alone(), before + 1, "its own project's waiter declines");
  assert.equal(((await wait()).entry.result as { envelope: { event: string } }).envelope.event, woke.eventId);
  // A live run of q with `c` in its cancel_on: the same.
  const doomed = await newRunningScript(q);
  await db.pool.query(`update runs set cancel_on = '{c}' where id = $1`, [doomed]);
  before = alone();
  await emit(p, "c");
  assert.equal(alone(), before + 1, "another project's cancel_on does not decline");
  await emit(q, "c");
  assert.equal(alone(), before + 1, "its own project's cancel_on declines");
  assert.equal((await db.pool.query<{ status: string }>(`select status from runs where id = $1`, [doomed])).rows[0]!.status, "cancelled");
  await gc.close();
});

void test("a waiter that notes the bus position while a one-round-trip batch waits for its lock is given that batch's event", async () => {
  const p = await newProject();
  const gc = ingestCommitter();
  await gc.submit({ ...base, projectId: p, type: "ready" }); // the handlers of p are known now: none
  const runId = await newRunningScript(p);
  const waiter = await db.pool.connect();
  try {
    await waiter.query("begin");
    // The waiter holds the type's lock exclusively, its pending entry not yet committed.
    assert.equal(
      (await performCall(waiter, runId, { position: 0, kind: "wait-event", name: "ready", ordinal: 0, args: {} })).status,
      "pending",
    );
    const pending = gc.submit({ ...base, projectId: p, type: "ready", payload: "after the wait began" });
    await waitForLockWait();
    await waiter.query("commit");
    const event = await pending;
    const done = await withTransaction(db.pool, (tx) =>
      performCall(tx, runId, { position: 0, kind: "wait-event", name: "ready", ordinal: 0, args: {} }),
    );
    assert.equal(done.status, "done", "the batch saw the waiter that parked while it waited for the lock");
    assert.equal((done.entry.result as { envelope: { event: string } }).envelope.event, event.eventId);
    assert.equal(gc.stats.alone, 0, "it declined and went the transactional way");
  } finally {
    waiter.release();
  }
  await gc.close();
});

void test("an event needs its project, either way onto the bus (no foreign key checks it); a deleted project takes its events along", async () => {
  const p = await newProject();
  await assert.rejects(emit({ projectId: "prj_nosuch", type: "x" }), (err: unknown) => {
    assert.ok(err instanceof FlowError && err.code === "not_found", String(err));
    return true;
  });
  assert.equal(await eventCount("prj_nosuch"), 0);
  // The first emit reads the project's handlers (none take `x`), so the one-statement way is open to the next.
  await emit({ projectId: p, type: "x", payload: 1 });
  const lone = (): Promise<EmitResult[] | undefined> =>
    db.pool.connect().then(async (c) => {
      try {
        return await emitBatch.alone(c, [{ ...base, projectId: p, type: "x", payload: 2 }]);
      } finally {
        c.release();
      }
    });
  assert.equal((await lone())?.length, 1);
  assert.equal(await eventCount(p), 2);
  await db.pool.query(`delete from projects where id = $1`, [p]);
  assert.equal(await eventCount(p), 0, "the project's deletion deleted its events (migration 020's trigger)");
  assert.equal(await lone(), undefined, "the one-statement way declines for a project that is gone");
  assert.equal(await eventCount(p), 0);
});
