import { test } from "node:test";
import assert from "node:assert/strict";
import { approvalExecutor, approvalPark, approvalWakeOutcome } from "./approval.js";
import type { NodeContext } from "./types.js";

const ctxOf = (config: unknown): NodeContext => ({ node: { id: "gate", type: "approval", config: {} }, config }) as unknown as NodeContext;

void test("an approval node parks on a signal named after it, with its prompt and fields; timeout sets the deadline", () => {
  const fields = [{ name: "reason", type: "text", required: true }];
  const now = Date.UTC(2026, 10, 26, 12);
  assert.deepEqual(approvalPark(ctxOf({ prompt: "Deploy v2?", fields, timeout: "30m" }), now), {
    kind: "park",
    signal: "gate",
    deadline: new Date(now + 30 * 60_000),
    awaiting: { prompt: "Deploy v2?", fields },
  });
  assert.deepEqual(approvalPark(ctxOf({}), now), { kind: "park", signal: "gate", awaiting: { prompt: "Approve gate?", fields: [] } });
});

void test("bad config fails the node with the config path, never parks", async () => {
  const cases: Array<[unknown, RegExp]> = [
    [{ fields: [{ name: "env", type: "select" }] }, /config\.fields\[0\]\.options: a select needs/],
    [{ timeout: "soon" }, /config\.timeout:/],
    [{ timeout: 30 }, /config\.timeout: must be a duration/],
    [{ prompt: { $template: "unevaluated" } }, /config\.prompt: must be a string/],
    [{ promt: "typo" }, /config\.promt: not an approval setting/],
    [{ prompt: "x".repeat(64 * 1024 + 1) }, /config\.prompt: is 65537 characters long/],
  ];
  for (const [config, want] of cases) {
    const o = await approvalExecutor.start(ctxOf(config));
    assert.equal(o.kind, "failed", JSON.stringify(config).slice(0, 80));
    assert.match(o.kind === "failed" ? o.error : "", want);
  }
});

void test("a woken gate: reject fails the node naming who; an approval, a direct signal or a timeout succeeds with the payload", () => {
  assert.deepEqual(approvalWakeOutcome({ decision: "reject", approved_by: "ana" }), {
    kind: "failed",
    error: "the gate was rejected by ana",
    output: { decision: "reject", approved_by: "ana" },
  });
  for (const payload of [{ decision: "approve", reason: "ok", approved_by: "ana" }, { anything: 1 }, { timed_out: true }, null]) {
    assert.deepEqual(approvalWakeOutcome(payload), { kind: "succeeded", output: payload });
  }
});

void test("a gate woken by a signal is attributed to the signal's sender, whatever the payload says", () => {
  assert.deepEqual(approvalWakeOutcome({ decision: "approve", approved_by: "the-ceo", note: "x" }, "mallory"), {
    kind: "succeeded",
    output: { decision: "approve", approved_by: "mallory", note: "x" },
  });
  assert.deepEqual(approvalWakeOutcome({ decision: "reject", approved_by: "the-ceo" }, "mallory"), {
    kind: "failed",
    error: "the gate was rejected by mallory",
    output: { decision: "reject", approved_by: "mallory" },
  });
  assert.deepEqual(approvalWakeOutcome({}, "mallory"), { kind: "succeeded", output: { approved_by: "mallory" } });
  // A payload that is no object stays as sent; a timeout has no sender.
  for (const payload of ["yes", null, [1]])
    assert.deepEqual(approvalWakeOutcome(payload, "mallory"), { kind: "succeeded", output: payload });
  assert.deepEqual(approvalWakeOutcome({ timed_out: true }), { kind: "succeeded", output: { timed_out: true } });
});
