/**
 * FlowError's instanceof holds across copies of this module (the CLI's bundle carries its own copy,
 * scripts/bundle-cli.mjs), and for nothing that merely looks like one.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { FlowError } from "./errors.js";

/** A second instance of this module, as a bundle's inlined copy is. */
const otherCopy = async (): Promise<typeof FlowError> =>
  ((await import(`./errors.js?copy=${Date.now()}`)) as { FlowError: typeof FlowError }).FlowError;

void test("a FlowError from another copy of core's errors is a FlowError, both ways", async () => {
  const Other = await otherCopy();
  assert.notEqual(Other, FlowError);
  const theirs = new Other("not_found", "no such run");
  const ours = new FlowError("conflict", "busy");
  assert.ok(theirs instanceof FlowError);
  assert.ok(ours instanceof Other);
  assert.equal(theirs.code, "not_found");
});

void test("only a FlowError is one: not an Error named FlowError, a look-alike object, null or a primitive", () => {
  const named = Object.assign(new Error("x"), { name: "FlowError", code: "internal" });
  const lookAlike = { name: "FlowError", code: "internal", message: "x", [Symbol.for("flowsvc.FlowErrorX")]: true };
  const values: unknown[] = [named, lookAlike, null, undefined, "FlowError", 0, Object.create(null)];
  values.forEach((value, i) => assert.equal(value instanceof FlowError, false, `values[${i}]`));
});

void test("a subclass keeps the ordinary check: a plain FlowError is not one of it", () => {
  class StepFailed extends FlowError {}
  const sub = new StepFailed("internal", "step failed");
  assert.ok(sub instanceof StepFailed);
  assert.ok(sub instanceof FlowError);
  assert.equal(new FlowError("internal", "x") instanceof StepFailed, false);
});
