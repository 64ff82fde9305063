import assert from "node:assert/strict";
import { test } from "node:test";
import type { MirroredRun } from "@flowsvc/store";
import { SUMMARY_MAX_BYTES, clipUtf8, flowRunStatus, runSummary, sameStatus, statusPatch } from "./flowrun-summary.js";

const run = (over: Partial<MirroredRun> = {}): MirroredRun => ({
  id: "run-0123456789abcdefghjkmnpqrs",
  org: "acme",
  project: "shop",
  status: "succeeded",
  substate: null,
  idempotency_key: null,
  error: null,
  output: null,
  created_at: new Date("2026-11-24T06:00:00Z"),
  started_at: new Date("2026-11-24T06:00:01Z"),
  finished_at: new Date("2026-11-24T06:00:02Z"),
  filename: "r.sh",
  interpreter: ["bash"],
  tags: [],
  ...over,
});

test("a summary stays within 1 KiB of UTF-8 whatever the run printed, cut on a character boundary", () => {
  for (const tail of ["x".repeat(10 * 1024 * 1024), "é".repeat(5000), "😀".repeat(3000), "a\u{10FFFF}".repeat(999)]) {
    const s = runSummary(run(), tail);
    assert.ok(Buffer.byteLength(s) <= SUMMARY_MAX_BYTES, `${Buffer.byteLength(s)} bytes`);
    assert.ok(!s.includes("\ufffd"));
    assert.ok(s.startsWith("…"), "the end of the output is kept");
  }
  assert.equal(clipUtf8("short", 10), "short");
});

test("a failed run's summary is its error; an output wins over the printed tail", () => {
  assert.equal(runSummary(run({ status: "failed", error: "exit 3" }), "noise"), "exit 3");
  assert.equal(runSummary(run({ output: { ok: true } }), "noise"), '{"ok":true}');
});

test("the Succeeded condition follows the status, and a status equal but for transition times is the same", () => {
  const now = new Date("2026-11-24T06:00:03Z");
  const done = flowRunStatus(run(), { summary: "", now });
  assert.equal(done.conditions?.[0]?.status, "True");
  const failed = flowRunStatus(run({ status: "failed", error: "boom" }), { now });
  assert.equal(failed.conditions?.[0]?.reason, "Failed");
  const parked = flowRunStatus(run({ status: "parked", finished_at: null, substate: { name: "approve", kind: "wait-approval" } }), { now });
  assert.equal(parked.substate, "wait-approval:approve");
  assert.equal(parked.conditions?.[0]?.status, "Unknown");
  const later = flowRunStatus(run(), { summary: "", now: new Date("2026-11-24T07:00:00Z") });
  assert.ok(sameStatus(done, later));
  assert.ok(!sameStatus(done, failed));
});

test("the status patch clears what the run no longer has (a merge patch keeps a key it leaves out), nothing else", () => {
  const now = new Date("2026-11-24T06:00:03Z");
  const parked = flowRunStatus(run({ status: "parked", finished_at: null, substate: { name: "timer", kind: "sleep" } }), { now });
  const done = flowRunStatus(run(), { summary: "", now });
  const patch = statusPatch(parked, done);
  assert.equal(patch.substate, null);
  assert.equal(patch.status, "succeeded");
  assert.deepEqual(statusPatch(undefined, done), { ...done });
  assert.ok(!Object.values(statusPatch(done, done)).includes(null));
});
