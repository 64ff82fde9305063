import { test } from "node:test";
import assert from "node:assert/strict";
import {
  EXPIRED_RESULTS,
  decideSuspend,
  decideWait,
  expiredResult,
  isWaitDue,
  substateOf,
  waitDeadline,
  waitDurationMs,
  wakeAction,
} from "./waits.js";

const NOW = 1_800_000_000_000;

void test("a sleep parks on its first call even when already due, then expires with {}", () => {
  assert.deepEqual(decideWait({ kind: "sleep", deadlineMs: NOW - 1, fresh: true }, NOW), { state: "pending" });
  assert.deepEqual(decideWait({ kind: "sleep", deadlineMs: NOW, fresh: false }, NOW), { state: "expired", result: {} });
  assert.deepEqual(decideWait({ kind: "sleep", deadlineMs: NOW + 1 }, NOW), { state: "pending" });
});

void test("a wait-signal answers the signal that arrived, even past its deadline; else times out at the deadline", () => {
  assert.deepEqual(decideWait({ kind: "wait-signal", deadlineMs: NOW - 5, arrived: { payload: { ok: true } } }, NOW), {
    state: "answered",
    result: { payload: { ok: true } },
  });
  assert.deepEqual(decideWait({ kind: "wait-signal", deadlineMs: null, arrived: { payload: null } }, NOW), {
    state: "answered",
    result: { payload: null },
  });
  assert.deepEqual(decideWait({ kind: "wait-signal", deadlineMs: NOW - 1 }, NOW), { state: "expired", result: { timed_out: true } });
  assert.deepEqual(decideWait({ kind: "wait-signal", deadlineMs: NOW + 1 }, NOW), { state: "pending" });
});

void test("a wait without a deadline never expires, whatever the clock says", () => {
  for (const now of [0, NOW, Number.MAX_SAFE_INTEGER, Infinity]) {
    assert.deepEqual(decideWait({ kind: "wait-signal", deadlineMs: null }, now), { state: "pending" });
    assert.deepEqual(decideWait({ kind: "wait-event", deadlineMs: null }, now), { state: "pending" });
  }
});

void test("a wait-event times out at its deadline; a signal does not answer it (events come from the bus)", () => {
  assert.deepEqual(decideWait({ kind: "wait-event", deadlineMs: NOW, arrived: { payload: 1 } }, NOW), {
    state: "expired",
    result: { timed_out: true },
  });
  assert.deepEqual(decideWait({ kind: "wait-event", deadlineMs: NOW + 1, arrived: { payload: 1 } }, NOW), { state: "pending" });
});

void test("deadlines: a sleep's duration, a wait's timeout, none when unbounded; huge ones stay finite", () => {
  assert.equal(waitDurationMs("sleep", { duration_ms: 500 }), 500);
  assert.equal(waitDurationMs("wait-signal", { timeout_ms: 20 }), 20);
  assert.equal(waitDurationMs("wait-event", {}), undefined);
  assert.equal(waitDeadline(NOW, undefined), null);
  assert.equal(waitDeadline(NOW, 0), NOW);
  assert.equal(waitDeadline(NOW, 30 * 86_400_000), NOW + 30 * 86_400_000);
  assert.equal(isWaitDue(null, Infinity), false);
  assert.equal(isWaitDue(NOW, NOW), true);
});

void test("expired results by kind, as the store's SQL reads them", () => {
  assert.deepEqual(EXPIRED_RESULTS, { sleep: {}, "wait-signal": { timed_out: true }, "wait-event": { timed_out: true } });
  assert.deepEqual(expiredResult("sleep"), {});
});

void test("a resolved wait queues a parked run, flags a running one, leaves the others", () => {
  assert.equal(wakeAction("parked"), "queue");
  assert.equal(wakeAction("running"), "flag");
  for (const s of ["queued", "succeeded", "failed", "cancelled", undefined, "parked\u0000"]) assert.equal(wakeAction(s), "none");
});

void test("a suspend requeues when something resolved or nothing waits, else parks on the latest wait until the earliest deadline", () => {
  const waits = [
    { kind: "wait-signal", name: "go", position: 1, deadlineMs: NOW + 50 },
    { kind: "sleep", name: "", position: 3, deadlineMs: NOW + 90 },
    { kind: "lock", name: "db", position: 2, deadlineMs: null },
  ];
  assert.deepEqual(decideSuspend({ wakeRequested: true, resolvedDue: 0, pending: waits }), { type: "requeue" });
  assert.deepEqual(decideSuspend({ wakeRequested: false, resolvedDue: 1, pending: waits }), { type: "requeue" });
  assert.deepEqual(decideSuspend({ wakeRequested: false, resolvedDue: 0, pending: [] }), { type: "requeue" });
  assert.deepEqual(decideSuspend({ wakeRequested: false, resolvedDue: 0, pending: waits }), {
    type: "park",
    substate: { name: "timer", kind: "sleep" },
    deadlineMs: NOW + 50,
  });
  assert.deepEqual(decideSuspend({ wakeRequested: false, resolvedDue: 0, pending: [waits[2]!] }), {
    type: "park",
    substate: { name: "awaiting_lease", kind: "lock" },
    deadlineMs: null,
  });
});

void test("substates name what a parked run waits for", () => {
  assert.deepEqual(substateOf({ kind: "wait-event", name: "push", position: 4 }), { name: "event:push#4", kind: "wait-event" });
  assert.deepEqual(substateOf({ kind: "wait-signal", name: "a\u0000b", position: 0 }), { name: "a\u0000b", kind: "wait-signal" });
  assert.deepEqual(substateOf({ kind: "activity-wait-all", name: "", position: 0 }), { name: "activities", kind: "activity-wait-all" });
});
