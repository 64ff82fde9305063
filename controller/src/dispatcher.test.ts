// The dispatcher against fake launchers (the Launcher port) and a real test Postgres: jobs are
// written as a submit writes them, NOTIFY comes through a real Listener, and every wait is on a
// condition (a launch recorded, a row), never on the clock.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRun, digestToken, listEvents, mintId } from "@flowsvc/store";
import { FakeLauncher } from "./testing/fake-launcher.js";
import { openTestStore, startDispatcher, submitRun, type TestStore } from "./testing/dispatch-kit.js";
import { waitFor } from "@flowsvc/store";

const withStore = async (fn: (store: TestStore) => Promise<void>): Promise<void> => {
  const store = await openTestStore();
  try {
    await fn(store);
  } finally {
    await store.close();
  }
};

const jobRow = async (store: TestStore, jobId: string) => {
  const { rows } = await store.db.pool.query<{ status: string; attempt: number; token_digest: Buffer | null }>(
    `select status, attempt, token_digest from jobs where id = $1`,
    [jobId],
  );
  return rows[0]!;
};

const runRow = async (store: TestStore, runId: string) => {
  const { rows } = await store.db.pool.query<{ status: string; error: string | null }>(`select status, error from runs where id = $1`, [
    runId,
  ]);
  return rows[0]!;
};

test("a queued job is launched once, with a token whose digest is the job row's", () =>
  withStore(async (store) => {
    const pool = new FakeLauncher({ slots: 2 });
    const { dispatcher } = await startDispatcher(store, [pool]);
    try {
      // Submitted after start: only the submit's NOTIFY can wake the dispatcher (the poll is an hour).
      const { runId, jobId } = await submitRun(store);
      await waitFor("the job's launch", () => pool.launches.length === 1);
      const [launch] = pool.launches;
      assert.deepEqual(
        { ...launch, token: undefined },
        { jobId, runId, attempt: 1, token: undefined, capabilities: [], org: store.orgName, project: "p" },
      );
      assert.match(launch!.token, /^job_/);
      const row = await jobRow(store, jobId);
      assert.equal(row.status, "dispatched");
      assert.equal(row.attempt, 1);
      assert.deepEqual(row.token_digest, digestToken(launch!.token));
      // A later job is launched by a later pass: by then the first was not launched again.
      const second = await submitRun(store);
      await waitFor("the second job's launch", () => pool.launchesOf(second.jobId).length === 1);
      assert.equal(pool.launchesOf(jobId).length, 1);
      assert.notEqual(pool.launchesOf(second.jobId)[0]!.token, launch!.token);
    } finally {
      dispatcher.stop();
    }
  }));

test("no more launches than free slots; the rest go when a slot frees and the dispatcher is nudged", () =>
  withStore(async (store) => {
    const jobs = [await submitRun(store), await submitRun(store), await submitRun(store)];
    const pool = new FakeLauncher({ slots: 2 });
    const { dispatcher } = await startDispatcher(store, [pool]);
    try {
      await waitFor("two launches", () => pool.launches.length === 2);
      // Oldest first; the third is not claimed (a claimed job without a slot would be lost until its lease ran out).
      assert.deepEqual(
        pool.launches.map((l) => l.jobId),
        [jobs[0]!.jobId, jobs[1]!.jobId],
      );
      assert.deepEqual(await jobRow(store, jobs[2]!.jobId), { status: "queued", attempt: 0, token_digest: null });
      pool.finish(jobs[0]!.jobId); // slotFreed nudges the dispatcher
      await waitFor("the third launch", () => pool.launches.length === 3);
      assert.equal(pool.launches[2]!.jobId, jobs[2]!.jobId);

      // A pool grown while jobs wait takes them at the next nudge.
      const more = [await submitRun(store), await submitRun(store)];
      // With every slot taken they stay queued, not claimed and held.
      assert.equal((await jobRow(store, more[1]!.jobId)).status, "queued");
      pool.setSlots(4);
      dispatcher.nudge();
      await waitFor("both new jobs launched", () => more.every((j) => pool.launchesOf(j.jobId).length === 1));
      assert.equal(pool.launches.length, 5);
      assert.equal(pool.overbooked, 0, "a launch was made with no free slot");
    } finally {
      dispatcher.stop();
    }
  }));

test("a job goes only to a pool that advertises what it needs; a need no pool serves is warned about once", () =>
  withStore(async (store) => {
    const plain = new FakeLauncher({ slots: 2 });
    const gpu = new FakeLauncher({ slots: 2, capabilities: ["gpu", "linux"] });
    const needsGpu = await submitRun(store, ["gpu"]);
    const needsTpu = await submitRun(store, ["tpu"]);
    const needsNothing = await submitRun(store);
    const { dispatcher, warnings } = await startDispatcher(store, [plain, gpu], { intervals: { unservedCheckMs: 10 } });
    try {
      await waitFor("the gpu job on the gpu pool", () => gpu.launchesOf(needsGpu.jobId).length === 1);
      await waitFor("the plain job launched", () => plain.launches.length + gpu.launches.length === 2);
      assert.deepEqual(gpu.launchesOf(needsGpu.jobId)[0]!.capabilities, ["gpu"]);
      assert.deepEqual(plain.launchesOf(needsGpu.jobId), []);
      // Pools are filled in order: the first pool serves a job that needs nothing.
      assert.equal(plain.launchesOf(needsNothing.jobId).length, 1);

      await waitFor("the tpu warning", () => warnings.length === 1);
      assert.deepEqual(warnings[0]!.obj["needs"], ["tpu"]);
      assert.match(
        warnings[0]!.msg,
        /capabilities tpu, which no agent pool of this server advertises; start one with --agent-pool tpu:<n>/,
      );
      // A later check that warns about a new need has seen the tpu job again, and kept quiet about it.
      await submitRun(store, ["fpga", "arm"]);
      await waitFor("the second warning", () => warnings.length === 2);
      assert.match(warnings[1]!.msg, /capabilities arm,fpga,/);
      assert.equal(warnings.filter((w) => w.msg.includes("capabilities tpu,")).length, 1);
      assert.equal(plain.launchesOf(needsTpu.jobId).length + gpu.launchesOf(needsTpu.jobId).length, 0);
      assert.equal((await jobRow(store, needsTpu.jobId)).status, "queued");
    } finally {
      dispatcher.stop();
    }
  }));

test("an agent that ends without finishing gets its job requeued and launched again, attempt + 1", () =>
  withStore(async (store) => {
    const pool = new FakeLauncher({ slots: 1 });
    const { dispatcher, logs } = await startDispatcher(store, [pool]);
    try {
      const { jobId } = await submitRun(store);
      await waitFor("the first launch", () => pool.launches.length === 1);
      const first = pool.launches[0]!;
      pool.exit(jobId, 137, null);
      await waitFor("the relaunch", () => pool.launches.length === 2);
      const again = pool.launches[1]!;
      assert.equal(again.jobId, jobId);
      assert.equal(again.attempt, 2);
      assert.notEqual(again.token, first.token);
      const row = await jobRow(store, jobId);
      assert.equal(row.attempt, 2);
      assert.deepEqual(row.token_digest, digestToken(again.token), "the first dispatch's token must be dead");
      assert.ok(logs.some((l) => l.msg.startsWith("agent ended without finishing its job") && l.obj["attempt"] === 1));

      // A late report of the first dispatch's agent does not requeue the second's job.
      dispatcher.agentExited(first);
      await dispatcher.drain();
      assert.deepEqual(await jobRow(store, jobId), { status: "dispatched", attempt: 2, token_digest: digestToken(again.token) });
    } finally {
      dispatcher.stop();
    }
  }));

test("an agent that never started (launchFailed) gives its job back after the delay without spending an attempt", () =>
  withStore(async (store) => {
    const pool = new FakeLauncher({ slots: 1 });
    const { dispatcher, warnings } = await startDispatcher(store, [pool], { maxAttempts: 1, intervals: { pollMs: 50 } });
    try {
      const { jobId } = await submitRun(store);
      await waitFor("the first launch", () => pool.launchesOf(jobId).length === 1);
      const before = Date.now();
      pool.failLaunch(jobId, "0/1 nodes are available", 300);
      await waitFor("the second launch", () => pool.launchesOf(jobId).length === 2);
      // The same attempt again: with maxAttempts 1 a burnt attempt would have failed the run instead.
      assert.equal(pool.launchesOf(jobId)[1]!.attempt, 1);
      assert.ok(Date.now() - before >= 250, "not dispatched again before its delay");
      assert.equal((await jobRow(store, jobId)).status, "dispatched");
      assert.ok(warnings.some((w) => w.msg.startsWith("agent did not start") && w.obj["reason"] === "0/1 nodes are available"));
    } finally {
      dispatcher.stop();
    }
  }));

test("after maxAttempts dispatches the run fails with the dispatch count and a run.failed event", () =>
  withStore(async (store) => {
    const pool = new FakeLauncher({ slots: 1 });
    const { dispatcher } = await startDispatcher(store, [pool], { maxAttempts: 2 });
    try {
      const { runId, jobId } = await submitRun(store);
      await waitFor("the first launch", () => pool.launches.length === 1);
      pool.exit(jobId);
      await waitFor("the second launch", () => pool.launches.length === 2);
      pool.exit(jobId);
      await waitFor("the run to fail", async () => (await runRow(store, runId)).status === "failed");
      const error = "the job was dispatched 2 times and no agent finished it";
      assert.deepEqual(await runRow(store, runId), { status: "failed", error });
      assert.deepEqual(
        pool.launches.map((l) => l.attempt),
        [1, 2],
        "no third launch",
      );
      assert.equal((await jobRow(store, jobId)).status, "done");
      const failed = await listEvents(store.db.pool, store.projectId, { type: "run.failed", limit: 10 });
      assert.equal(failed.length, 1);
      assert.deepEqual(
        {
          run_id: (failed[0]!.payload as Record<string, unknown>)["run_id"],
          error: (failed[0]!.payload as Record<string, unknown>)["error"],
        },
        { run_id: runId, error },
      );
      assert.equal(failed[0]!.source_run_id, runId);
    } finally {
      dispatcher.stop();
    }
  }));

test("the reaper requeues a job whose lease expired, which is launched again, and leaves a live lease alone", () =>
  withStore(async (store) => {
    // Three slots: the silent agent of the expired job still holds one, as a real one would.
    const pool = new FakeLauncher({ slots: 3 });
    const { dispatcher, logs } = await startDispatcher(store, [pool], { intervals: { reapMs: 10 } });
    try {
      const live = await submitRun(store);
      const silent = await submitRun(store);
      await waitFor("both launches", () => pool.launches.length === 2);
      // The agent of one went silent (no exit seen, no heartbeat): its lease runs out, in the row.
      await store.db.pool.query(`update jobs set lease_expires_at = now() - interval '1 second' where id = $1`, [silent.jobId]);
      await waitFor("the relaunch", () => pool.launches.length === 3);
      assert.deepEqual(
        pool.launchesOf(silent.jobId).map((l) => l.attempt),
        [1, 2],
      );
      assert.deepEqual((await jobRow(store, silent.jobId)).token_digest, digestToken(pool.launchesOf(silent.jobId)[1]!.token));
      // The pass that requeued it saw the live job too.
      assert.deepEqual(
        pool.launchesOf(live.jobId).map((l) => l.attempt),
        [1],
      );
      assert.equal((await jobRow(store, live.jobId)).status, "dispatched");
      const reaped = logs.filter((l) => l.msg.startsWith("agent leases expired"));
      assert.deepEqual(
        reaped.map((l) => l.obj["runs"]),
        [[silent.runId]],
      );
    } finally {
      dispatcher.stop();
    }
  }));

test("a stopped dispatcher launches nothing more", () =>
  withStore(async (store) => {
    const stopped = new FakeLauncher({ slots: 2 });
    const first = await startDispatcher(store, [stopped], { intervals: { pollMs: 10 } });
    const { jobId: before } = await submitRun(store);
    try {
      await waitFor("a launch before stop", () => stopped.launches.length === 1);
    } finally {
      first.dispatcher.stop();
    }
    const { jobId } = await submitRun(store);
    first.dispatcher.nudge();
    // The job is there for the taking: another dispatcher takes it, the stopped one never did.
    const other = new FakeLauncher({ slots: 2 });
    const second = await startDispatcher(store, [other]);
    try {
      await waitFor("the other dispatcher's launch", () => other.launches.length === 1);
      assert.equal(other.launches[0]!.jobId, jobId);
      assert.deepEqual(
        stopped.launches.map((l) => l.jobId),
        [before],
      );
      assert.equal((await jobRow(store, jobId)).attempt, 1);
    } finally {
      second.dispatcher.stop();
    }
  }));

test("an emit's reservation: only a drained pool's spare slot, launched once at attempt 1 with its token; a held slot is never claimed", () =>
  withStore(async (store) => {
    const pool = new FakeLauncher({ slots: 2, capabilities: ["polyglot"] });
    const { dispatcher } = await startDispatcher(store, [pool]);
    try {
      // The first pass found nothing queued: the pool is drained, and lends its slots.
      await waitFor("the pool drained", () => {
        const s = dispatcher.reserve(["polyglot"]);
        s?.release();
        return s !== undefined;
      });
      assert.equal(dispatcher.reserve(["gpu"]), undefined, "no pool advertises gpu");
      const [held, launched] = [dispatcher.reserve(["polyglot"])!, dispatcher.reserve(["polyglot"])!];
      assert.equal(dispatcher.reserve(["polyglot"]), undefined, "both slots are held");

      // A job queued now wakes a pass (the dispatcher heard the NOTIFY before this subscriber), which has no slot to claim it into.
      let heard = false;
      const off = store.listener.on("flowsvc_jobs", () => (heard = true));
      const queued = await submitRun(store, ["polyglot"]);
      await waitFor("the NOTIFY", () => heard);
      off();
      await new Promise((r) => setImmediate(r));
      assert.equal((await jobRow(store, queued.jobId)).status, "queued");
      assert.equal(dispatcher.reserve(["polyglot"]), undefined, "not drained: a job waits");

      launched.launch({ jobId: "job-x", runId: "run-x", org: store.orgName, project: "p" });
      launched.launch({ jobId: "job-x", runId: "run-x", org: store.orgName, project: "p" });
      assert.equal(pool.launches.length, 1, "launched once");
      const [launch] = pool.launches;
      assert.deepEqual(
        { ...launch, token: undefined },
        { jobId: "job-x", runId: "run-x", attempt: 1, token: undefined, capabilities: ["polyglot"], org: store.orgName, project: "p" },
      );
      assert.deepEqual(digestToken(launch!.token), launched.digest);
      // Released, the slot goes to the job that waits.
      held.release();
      await waitFor("the queued job's launch", () => pool.launchesOf(queued.jobId).length === 1);
      assert.equal(pool.overbooked, 0);
    } finally {
      dispatcher.stop();
    }
    assert.equal(dispatcher.reserve([]), undefined, "a stopped dispatcher lends nothing");
  }));

test("a dispatcher stopped while its claim waits for a connection gives what the claim took back to the queue, its attempt unspent, and launches nothing", () =>
  withStore(async (store) => {
    const launcher = new FakeLauncher({ slots: 2 });
    const { dispatcher } = await startDispatcher(store, [launcher]);
    const pool = store.db.pool;
    // Every connection of the pool held: the claim that the job's NOTIFY starts waits for one.
    const held = await Promise.all(Array.from({ length: pool.options.max ?? 10 }, () => pool.connect()));
    let jobId = "";
    let returned = false;
    const off = store.listener.on("flowsvc_jobs", () => (returned = true));
    try {
      await held[0]!.query("begin");
      const runId = mintId("run");
      await createRun(held[0]!, {
        id: runId,
        projectId: store.projectId,
        source: "true\n",
        filename: "t.sh",
        trusted: true,
        trigger: { type: "manual" },
      });
      jobId = (await held[0]!.query<{ id: string }>(`select id from jobs where run_id = $1`, [runId])).rows[0]!.id;
      await held[0]!.query("commit");
      await waitFor("the dispatcher's claim waiting for a connection", () => pool.waitingCount === 1);
      dispatcher.stop();
      returned = false; // the submit's own NOTIFY may have come before the dispatcher's
    } finally {
      for (const c of held) c.release();
    }
    try {
      await waitFor("the claimed job returned (its NOTIFY)", () => returned);
    } finally {
      off();
    }
    assert.equal(launcher.launches.length, 0);
    assert.deepEqual({ ...(await jobRow(store, jobId)) }, { status: "queued", attempt: 0, token_digest: null });
  }));
