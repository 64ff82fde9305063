/**
 * The local engine's spools without a script: signals queue per name in arrival order and each
 * wait takes one; a bounded wait times out; locks are granted first come, first served, and a
 * holder whose process is gone does not block the group; `flow signal` finds only live local runs.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { FlowError, newId } from "@flowsvc/core";
import { waitFor } from "@flowsvc/store";
import { localStateDir } from "./config.js";
import { createLocalRunDir, localRunDir } from "./local-run-dir.js";
import type { LocalRunDir } from "./local-run-dir.js";
import { deliverLocalSignal } from "./local-signal.js";
import { acquireLock } from "./lock-queue.js";
import { spoolSignal, waitForSignal } from "./signal-spool.js";

let home: string;
let stateDir: string;
const env = (): Record<string, string> => ({ XDG_STATE_HOME: home });

before(async () => {
  home = await mkdtemp(join(tmpdir(), "flowsvc-local-engine-"));
  stateDir = localStateDir(env());
});

after(async () => {
  await rm(home, { recursive: true, force: true });
});

const newRun = async (pid = process.pid): Promise<LocalRunDir> => {
  const run = localRunDir(stateDir, newId("run", Date.now(), crypto.getRandomValues(new Uint8Array(10))));
  assert.ok(run);
  await createLocalRunDir(run, pid);
  return run;
};

const never = new AbortController().signal;

/** Waits for `check` (polled every 10 ms; fails after 10 s). */
const until = (what: string, check: () => Promise<boolean>): Promise<void> => waitFor(what, check, 10_000, 10);

/** The entries of a lock group's queue (one file per holder or waiter). */
const queued = (dir: string) =>
  readdir(dir).then(
    (names) => names.filter((n) => n.endsWith(".json")),
    () => [],
  );

/** The pid of a process that has exited. */
const deadPid = (): number => {
  const r = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
  return Number(r.stdout);
};

void test("the state directory is $XDG_STATE_HOME/flowsvc/local, else ~/.local/state/flowsvc/local", () => {
  assert.equal(localStateDir({ XDG_STATE_HOME: "/x/state", HOME: "/home/u" }), "/x/state/flowsvc/local");
  assert.equal(localStateDir({ XDG_STATE_HOME: "relative", HOME: "/home/u" }), "/home/u/.local/state/flowsvc/local");
  assert.equal(localStateDir({ HOME: "/home/u" }), "/home/u/.local/state/flowsvc/local");
});

void test("signals queue per name: each wait takes the oldest one of its name", async () => {
  const run = await newRun();
  await spoolSignal(run, "go", 1);
  await spoolSignal(run, "other", "x");
  await spoolSignal(run, "go", { n: 2 });
  assert.deepEqual(await waitForSignal(run, "go", 0, never), { payload: 1 });
  assert.deepEqual(await waitForSignal(run, "go", 0, never), { payload: { n: 2 } });
  assert.deepEqual(await waitForSignal(run, "go", 0, never), { timed_out: true });
  assert.deepEqual(await waitForSignal(run, "other", 0, never), { payload: "x" });
});

void test("a wait blocks until its signal arrives, and two waiters on one name draw one signal each", async () => {
  const run = await newRun();
  const settled: string[] = [];
  const first = waitForSignal(run, "a/b c", undefined, never).finally(() => settled.push("first"));
  const second = waitForSignal(run, "a/b c", undefined, never).finally(() => settled.push("second"));
  // A signal of another name, taken by a third waiter: the spool changed under the two waiters and
  // they are still waiting.
  await spoolSignal(run, "other", 0);
  assert.deepEqual(await waitForSignal(run, "other", undefined, never), { payload: 0 });
  assert.deepEqual(settled, [], "the waiters wait for their own name");
  const started = Date.now();
  assert.equal(await deliverLocalSignal(run.runId, "a/b c", '"one"', env()), true);
  assert.equal(await deliverLocalSignal(run.runId, "a/b c", '"two"', env()), true);
  const got = (await Promise.all([first, second])).map((r) => ("payload" in r ? r.payload : undefined)).sort();
  assert.deepEqual(got, ["one", "two"]);
  assert.ok(Date.now() - started < 1000, "the waiters woke promptly");
});

void test("a bounded wait with no signal times out after its timeout", async () => {
  const run = await newRun();
  const started = Date.now();
  assert.deepEqual(await waitForSignal(run, "late", 300, never), { timed_out: true });
  const took = Date.now() - started;
  assert.ok(took >= 300 && took < 10_000, `took ${took} ms`);
});

void test("flow signal finds only local runs: unknown ids and non-ids go to the server, a dead run is not_found", async () => {
  assert.equal(await deliverLocalSignal(newId("run", Date.now(), new Uint8Array(10)), "go", "null", env()), false);
  assert.equal(await deliverLocalSignal("../../etc", "go", "null", env()), false);
  const dead = await newRun(deadPid());
  await assert.rejects(
    deliverLocalSignal(dead.runId, "go", "null", env()),
    (err: unknown) => err instanceof FlowError && err.code === "not_found",
  );
  const live = await newRun();
  await assert.rejects(
    deliverLocalSignal(live.runId, "go", "{bad", env()),
    (err: unknown) => err instanceof FlowError && err.code === "invalid_argument",
  );
});

void test("locks are granted first come, first served, and released to the next in line", async () => {
  const locks = join(stateDir, "locks");
  const dir = join(locks, "deploy");
  const order: string[] = [];
  const first = await acquireLock(locks, "deploy", "run-a", never);
  const take = (id: string) => acquireLock(locks, "deploy", id, never).then((held) => (order.push(id), held));
  const b = take("run-b");
  await until("run-b to queue", async () => (await queued(dir)).length === 2);
  const c = take("run-c");
  await until("run-c to queue", async () => (await queued(dir)).length === 3);
  assert.deepEqual(order, [], "nobody gets the lease while it is held");
  await first.release();
  const heldB = await b;
  assert.deepEqual(order, ["run-b"], "the next in line, and only it");
  await heldB.release();
  await (await c).release();
  assert.deepEqual(order, ["run-b", "run-c"]);
});

void test("a lock entry whose process is gone does not block the group, and an aborted wait leaves the queue", async () => {
  const locks = join(stateDir, "locks");
  const dir = join(locks, "db");
  const held = await acquireLock(locks, "db", "run-x", never);
  await held.release();
  await writeFile(join(dir, "0000000000000001abcd-run-dead.json"), JSON.stringify({ run_id: "run-dead", pid: deadPid(), group: "db" }));
  const mine = await acquireLock(locks, "db", "run-y", never);
  const abort = new AbortController();
  const waiting = acquireLock(locks, "db", "run-z", abort.signal);
  await until("run-z to queue", async () => (await queued(dir)).some((n) => n.includes("run-z")));
  abort.abort(new Error("ending"));
  await assert.rejects(waiting, /ending/);
  assert.equal((await readdir(dir)).length, 1, "only the holder's entry is left");
  await mine.release();
});
