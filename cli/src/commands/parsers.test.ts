import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError, parseJsonFlag } from "./parsers.js";

void test("--payload takes any JSON the server can store, as sent", () => {
  assert.equal(parseJsonFlag("null"), null);
  assert.deepEqual(parseJsonFlag('{"n":1.7e308,"s":"caf\\u00e9","a":[[1]]}'), { n: 1.7e308, s: "café", a: [[1]] });
  // The server names these itself (body.payload holds a NUL ...): they survive the trip unchanged.
  assert.equal(parseJsonFlag('"a\\u0000b"'), "a\u0000b");
  assert.equal(parseJsonFlag('"\\ud800"'), "\ud800");
});

void test("--payload with a number past double range is refused where it is, not sent as null", () => {
  for (const [text, where] of [
    ["1e400", /^value is a number outside the range/],
    ['{"a":[1,-1e400]}', /^value\.a\[1\] is a number outside the range/],
    ['{"bad key":{"n":1e999}}', /^value\["bad key"\]\.n is a number outside the range/],
  ] as const) {
    assert.throws(
      () => parseJsonFlag(text),
      (err: unknown) => err instanceof InvalidArgumentError && where.test(err.message),
      text,
    );
  }
});

void test("--payload nested deeper than the server takes is refused, not a stack overflow reported as a lost connection", () => {
  const deep = "[".repeat(20_000) + "]".repeat(20_000);
  assert.throws(
    () => parseJsonFlag(deep),
    (err: unknown) =>
      err instanceof InvalidArgumentError && /^value(\[0\])+\.\.\. is nested more than 128 levels deep\.$/.test(err.message),
  );
  assert.equal((parseJsonFlag("[".repeat(128) + "]".repeat(128)) as unknown[]).length, 1);
});
