import { test } from "node:test";
import assert from "node:assert/strict";
import type { JournalEntry } from "./agent-api.js";
import { FlowError } from "./errors.js";
import { describeCall, indexJournal, matchJournal, parkedPosition, stepOutputTooLargeMessage } from "./journal.js";

const entry = (position: number, name: string, ordinal = 0, status: "done" | "pending" = "done"): JournalEntry => ({
  position,
  kind: "step",
  name,
  ordinal,
  status,
  result: { stdout_b64: "aGk=", exit: 0 },
});

void test("a call past the end of the journal is new", () => {
  assert.deepEqual(matchJournal(undefined, { kind: "step", name: "build", ordinal: 0 }, 0), { type: "new" });
});

void test("the recorded call at the same position replays its entry", () => {
  const recorded = entry(2, "build", 1);
  assert.deepEqual(matchJournal(recorded, { kind: "step", name: "build", ordinal: 1 }, 2), { type: "replay", entry: recorded });
});

void test("a pending record of the same call runs the call again", () => {
  assert.deepEqual(matchJournal(entry(0, "deploy", 0, "pending"), { kind: "step", name: "deploy", ordinal: 0 }, 0), { type: "new" });
});

void test("a different name at a recorded position is a determinism error naming both calls", () => {
  assert.throws(
    () => matchJournal(entry(3, "build"), { kind: "step", name: "test", ordinal: 0 }, 3),
    (err: unknown) => {
      assert.ok(err instanceof FlowError);
      assert.equal(err.code, "determinism");
      assert.equal(err.message, 'determinism error at call #3: the journal recorded step "build"#0 but the script called step "test"#0');
      return true;
    },
  );
});

void test("a different kind or ordinal at a recorded position is a determinism error", () => {
  assert.throws(
    () => matchJournal(entry(1, "x"), { kind: "sleep", name: "x", ordinal: 0 }, 1),
    /recorded step "x"#0 but the script called sleep "x"#0/,
  );
  assert.throws(
    () => matchJournal(entry(1, "x", 1), { kind: "step", name: "x", ordinal: 0 }, 1),
    /recorded step "x"#1 but the script called step "x"#0/,
  );
  assert.throws(() => matchJournal(entry(1, "x", 0, "pending"), { kind: "step", name: "y", ordinal: 0 }, 1), { name: "FlowError" });
});

void test("names with quotes are shown unambiguously", () => {
  assert.equal(describeCall({ kind: "step", name: 'say "hi"', ordinal: 2 }), 'step "say \\"hi\\""#2');
});

void test("the journal is indexed by position", () => {
  const map = indexJournal([entry(0, "a"), entry(1, "b")]);
  assert.equal(map.get(1)?.name, "b");
  assert.equal(map.get(2), undefined);
});

void test("the overflow message says how far over the 2 MiB limit the output went", () => {
  assert.equal(stepOutputTooLargeMessage(2 * 1024 * 1024 + 10), "step output is 2097162 bytes, 10 bytes over the 2 MiB limit");
});

void test("the position the previous pass parked on is the journal's last entry when its kind can park", () => {
  const e = (position: number, kind: string): JournalEntry => ({ position, kind, name: "", ordinal: 0, status: "done", result: {} });
  assert.equal(parkedPosition([]), -1);
  for (const kind of ["activity", "activity-collect", "activity-wait-all", "wait-event", "wait-signal", "sleep", "lock"]) {
    assert.equal(parkedPosition([e(0, "step"), e(1, kind)]), 1, kind);
  }
  // Out of order as the server may send them: the highest position counts.
  assert.equal(parkedPosition([e(2, "wait-event"), e(0, "step"), e(1, "activity")]), 2);
  // A pass that ended right after a call that never parks was lost mid-pass: nothing is new.
  for (const kind of ["step", "emit", "spawn", "unlock", "activity-submit"]) {
    assert.equal(parkedPosition([e(0, "activity"), e(1, kind)]), -1, kind);
  }
});
