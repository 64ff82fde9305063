import { test } from "node:test";
import assert from "node:assert/strict";
import { trustAfterReceiving, trustOf } from "./trust.js";

void test("only a person's act is trusted by itself; everything else takes the trust of what caused it", () => {
  assert.equal(trustOf({ by: "person" }), true);
  for (const trusted of [true, false]) {
    assert.equal(trustOf({ by: "delivery", trusted }), trusted);
    assert.equal(trustOf({ by: "event", event: { trusted } }), trusted);
    assert.equal(trustOf({ by: "run", run: { trusted } }), trusted);
  }
});

void test("a run that receives an untrusted event becomes untrusted, and a trusted event never restores one", () => {
  assert.equal(trustAfterReceiving({ trusted: true }, { trusted: true }), true);
  assert.equal(trustAfterReceiving({ trusted: true }, { trusted: false }), false);
  assert.equal(trustAfterReceiving({ trusted: false }, { trusted: true }), false);
  assert.equal(trustAfterReceiving({ trusted: false }, { trusted: false }), false);
});
