import { test } from "node:test";
import assert from "node:assert/strict";
import { decideLease, grantsAtOnce, holdsLease, leaseToRelease } from "./locks.js";

const req = (id: string, granted = false, live = true) => ({ id, granted, live });

void test("the oldest open request is granted when nobody holds the lease", () => {
  const queue = [req("a"), req("b")];
  assert.equal(decideLease(queue).grant, queue[0]);
  assert.deepEqual(decideLease([]), { grant: undefined, drop: [] });
});

void test("nobody is granted while a live request holds the lease, even a newer re-entrant one", () => {
  assert.equal(decideLease([req("a"), req("b", true)]).grant, undefined);
  assert.equal(decideLease([req("a", true), req("b"), req("c")]).grant, undefined);
});

void test("requests whose holder is gone are dropped and skipped, a gone holder frees the lease", () => {
  const queue = [req("dead-holder", true, false), req("dead", false, false), req("next"), req("later")];
  const d = decideLease(queue);
  assert.equal(d.grant, queue[2]);
  assert.deepEqual(
    d.drop.map((r) => r.id),
    ["dead-holder", "dead"],
  );
});

void test("in an arrival-only queue the oldest live request holds the lease", () => {
  const mine = req("mine");
  assert.equal(holdsLease([], mine), true);
  assert.equal(holdsLease([req("x", false, false)], mine), true);
  assert.equal(holdsLease([req("x", false, false), req("y")], mine), false);
});

void test("a run holding the group is granted again at once; unlock lets go of its newest lease", () => {
  assert.equal(grantsAtOnce(true), true);
  assert.equal(grantsAtOnce(false), false);
  assert.equal(leaseToRelease(["first", "second"]), "second");
  assert.equal(leaseToRelease([]), undefined);
});
