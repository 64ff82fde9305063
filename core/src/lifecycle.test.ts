import { test } from "node:test";
import assert from "node:assert/strict";
import { keepTail, lifecyclePayload, tagMap } from "./lifecycle.js";

const run = {
  id: "run-1",
  status: "failed",
  workflow: "flowsvc/script/v1",
  tags: ["env:prod", "nightly"],
  trigger: { type: "manual" },
  org: "default",
  project: "default",
};

test("a manual run's payload carries the common fields and trigger type manual only", () => {
  const p = lifecyclePayload(run, { error: "boom" }, undefined);
  assert.deepEqual(p, {
    run_id: "run-1",
    status: "failed",
    workflow: "flowsvc/script/v1",
    tags: ["env:prod", "nightly"],
    tag: { env: "prod" },
    trigger: { type: "manual" },
    error: "boom",
  });
});

test("a manual run's trigger is type manual only, even when the run recorded who submitted it", () => {
  const p = lifecyclePayload({ ...run, trigger: { type: "manual", sender: "admin" } }, {}, undefined);
  assert.deepEqual(p["trigger"], { type: "manual" });
  const push = lifecyclePayload({ ...run, trigger: { type: "push", sha: "abc", repo: "o/r", extra: 1 } }, {}, undefined);
  assert.deepEqual(push["trigger"], { type: "push", sha: "abc", repo: "o/r" });
});

test("run_url appears only when the server knows its public address", () => {
  assert.equal("run_url" in lifecyclePayload(run, {}, undefined), false);
  assert.match(String(lifecyclePayload(run, {}, "https://flow.example.com/")["run_url"]), /^https:\/\/flow\.example\.com\/runs\/run-1\?/);
});

test("an error longer than 4000 characters keeps its tail", () => {
  const long = "x".repeat(5000) + "the real cause";
  const p = lifecyclePayload(run, { error: long }, undefined);
  assert.equal((p["error"] as string).length, 4000);
  assert.ok((p["error"] as string).endsWith("the real cause"));
  assert.equal(keepTail("short"), "short");
});

test("the tail is cut on a code point boundary: an emoji split by the cut is dropped whole, never half", () => {
  const emoji = "\u{1F600}";
  const split = `${emoji.repeat(5000)}x`; // 10,001 units: the last 4000 start at an emoji's low half
  const tail = keepTail(split);
  assert.deepEqual([tail.length, tail], [3999, `${emoji.repeat(1999)}x`]);
  const whole = `x${emoji.repeat(5000)}`; // the last 4000 start at an emoji's high half: nothing dropped
  assert.equal(keepTail(whole), emoji.repeat(2000));
  assert.equal(keepTail(`a${emoji}${"b".repeat(3999)}`), "b".repeat(3999));
  const reason = lifecyclePayload(run, { reason: split }, undefined)["reason"];
  assert.equal(reason, tail);
});

test("tag map holds only k:v tags", () => {
  assert.deepEqual(tagMap(["a", "k:v", "x:y:z"]), { k: "v", x: "y:z" });
});
