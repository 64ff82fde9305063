// The timer loop against a real test Postgres: a run parks on a wait the way the agent routes park
// it (claim, call, suspend), the wait's deadline is moved into the past in its row (no test waits
// for the clock), and the loop must wake the run, which the dispatcher then hands to an agent.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseSchedule, type CallRequest } from "@flowsvc/core";
import {
  deliverSignal,
  digestToken,
  getSchedule,
  markJobRunning,
  performCall,
  startRunIfNeeded,
  suspendJob,
  upsertSchedule,
  withTransaction,
} from "@flowsvc/store";
import { FakeLauncher } from "./testing/fake-launcher.js";
import { openTestStore, startDispatcher, submitRun, type TestStore } from "./testing/dispatch-kit.js";
import { waitFor } from "@flowsvc/store";
import { TimerLoop } from "./timers.js";

const HOUR = 3_600_000;

interface Parked {
  store: TestStore;
  runId: string;
  launcher: FakeLauncher;
  timers: TimerLoop;
  logs: string[];
}

/**
 * A dispatched run whose agent claims it, makes `call` (at position 0) and suspends: parked on
 * that wait. `fn` gets it with a timer loop that is not started (call tick(), or start()).
 */
const withParkedRun = async (call: Omit<CallRequest, "position" | "ordinal">, fn: (p: Parked) => Promise<void>): Promise<void> => {
  const store = await openTestStore();
  const launcher = new FakeLauncher({ slots: 2 });
  const { dispatcher } = await startDispatcher(store, [launcher]);
  const logs: string[] = [];
  const timers = new TimerLoop(store.db.pool, (_obj, msg) => logs.push(msg));
  try {
    const { runId, jobId } = await submitRun(store);
    await waitFor("the run's launch", () => launcher.launches.length === 1);
    const parked = await withTransaction(store.db.pool, async (tx) => {
      const claimed = await markJobRunning(tx, {
        jobId,
        digest: digestToken(launcher.launches[0]!.token),
        agentId: "agt-test",
        leaseMs: HOUR,
      });
      assert.ok(claimed, "the launch's token is the job's live one");
      await startRunIfNeeded(tx, runId, undefined);
      const answer = await performCall(tx, runId, { ...call, position: 0, ordinal: 0 });
      assert.equal(answer.status, "pending");
      return suspendJob(tx, jobId, runId);
    });
    assert.equal(parked, "parked");
    launcher.finish(jobId);
    await fn({ store, runId, launcher, timers, logs });
  } finally {
    timers.stop();
    dispatcher.stop();
    await store.close();
  }
};

const state = async (p: Parked) => {
  // jobs: how many the run has had (a wake adds one; the dispatcher may take it at any time).
  const { rows } = await p.store.db.pool.query<{ run: string; entry: string; result: unknown; jobs: number }>(
    `select r.status as run, j.status as entry, j.result, (select count(*)::int from jobs where run_id = r.id) as jobs
       from runs r join journal j on j.run_id = r.id and j.position = 0 where r.id = $1`,
    [p.runId],
  );
  return rows[0]!;
};

/** Moves the parked wait's deadline into the past: what the clock would do, in the row. */
const passDeadline = async (p: Parked): Promise<void> => {
  const { rowCount } = await p.store.db.pool.query(
    `update journal set deadline = now() - interval '1 second' where run_id = $1 and position = 0 and deadline is not null`,
    [p.runId],
  );
  assert.equal(rowCount, 1, "the wait has a deadline");
};

test("a sleep whose deadline passed wakes the run: it is queued and dispatched again", () =>
  withParkedRun({ kind: "sleep", name: "sleep", args: { duration_ms: HOUR } }, async (p) => {
    await p.timers.tick();
    assert.deepEqual(await state(p), { run: "parked", entry: "pending", result: null, jobs: 1 }, "an hour's sleep is not due yet");

    await passDeadline(p);
    p.timers.start();
    await waitFor("the run's next launch", () => p.launcher.launches.length === 2);
    const relaunch = p.launcher.launches[1]!;
    assert.equal(relaunch.runId, p.runId);
    assert.notEqual(relaunch.jobId, p.launcher.launches[0]!.jobId, "a wake queues a new job");
    assert.deepEqual(await state(p), { run: "queued", entry: "done", result: {}, jobs: 2 });
    assert.deepEqual(p.logs, []);
  }));

test("a wait-signal whose timeout passed resumes with timed_out, and a later signal does not change it", () =>
  withParkedRun({ kind: "wait-signal", name: "go", args: { timeout_ms: HOUR } }, async (p) => {
    await p.timers.tick();
    assert.equal((await state(p)).entry, "pending");

    await passDeadline(p);
    await p.timers.tick();
    assert.deepEqual(await state(p), { run: "queued", entry: "done", result: { timed_out: true }, jobs: 2 });
    // Pinned: the branch already taken stays taken.
    const late = await withTransaction(p.store.db.pool, (tx) =>
      deliverSignal(tx, p.runId, { name: "go", payload: { late: true }, sentBy: "test" }),
    );
    assert.deepEqual(late, { delivered: false });
    assert.deepEqual((await state(p)).result, { timed_out: true });
  }));

test("a wait-event whose timeout passed resumes with timed_out", () =>
  withParkedRun({ kind: "wait-event", name: "deploy.done", args: { timeout_ms: HOUR } }, async (p) => {
    await passDeadline(p);
    await p.timers.tick();
    assert.deepEqual(await state(p), { run: "queued", entry: "done", result: { timed_out: true }, jobs: 2 });
  }));

test("a wait with no timeout never times out", () =>
  withParkedRun({ kind: "wait-signal", name: "go", args: {} }, async (p) => {
    // Unbounded (the spec's default): no deadline to pass, whatever the clock says.
    const { rows } = await p.store.db.pool.query<{ deadline: Date | null }>(`select deadline from journal where run_id = $1`, [p.runId]);
    assert.equal(rows[0]!.deadline, null);
    await p.timers.tick();
    assert.deepEqual(await state(p), { run: "parked", entry: "pending", result: null, jobs: 1 });
    // The signal still resumes it.
    await withTransaction(p.store.db.pool, (tx) => deliverSignal(tx, p.runId, { name: "go", payload: { n: 1 }, sentBy: "test" }));
    assert.deepEqual(await state(p), { run: "queued", entry: "done", result: { payload: { n: 1 } }, jobs: 2 });
  }));

test("the loop fires a schedule by its injected clock, once per tick, and the dispatcher launches the run", async () => {
  const store = await openTestStore();
  const launcher = new FakeLauncher({ slots: 2 });
  const { dispatcher } = await startDispatcher(store, [launcher]);
  let now = new Date("2026-06-01T10:00:30Z");
  const timers = new TimerLoop(store.db.pool, () => assert.fail("no pass fails"), { now: () => now });
  try {
    await upsertSchedule(store.db.pool, store.projectId, {
      ...parseSchedule("m", { cron: "* * * * *", reaction: { kind: "script", source: "true\n", filename: "m.sh" } }, now),
      createdBy: null,
    });
    await timers.tick();
    assert.equal((await getSchedule(store.db.pool, store.projectId, "m"))?.last_run_id, null, "not due at 10:00:30");
    now = new Date("2026-06-01T10:05:10Z"); // five ticks missed: one fires
    await timers.tick();
    await timers.tick();
    const s = await getSchedule(store.db.pool, store.projectId, "m");
    assert.equal(s?.next_fire_at, "2026-06-01T10:06:00.000Z");
    await waitFor("the tick's run to be launched", () => launcher.launches.some((l) => l.runId === s?.last_run_id));
    const { rows } = await store.db.pool.query<{ n: number }>(`select count(*)::int as n from runs where project_id = $1`, [
      store.projectId,
    ]);
    assert.equal(rows[0]!.n, 1);
  } finally {
    timers.stop();
    dispatcher.stop();
    await store.close();
  }
});
