import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError, parseJsonFlag } from "./parsers.js";

void test("--payload takes any JSON the server can store, as sent; what it would refuse is refused first, at its place", () => {
  assert.equal(parseJsonFlag("null"), null);
  assert.deepEqual(parseJsonFlag('{"n":1.7e308,"s":"caf\\u00e9","a":[[1]]}'), { n: 1.7e308, s: "café", a: [[1]] });
  assert.throws(() => parseJsonFlag('"a\\u0000b"'), /^InvalidArgumentError: the value holds a NUL/);
  assert.throws(() => parseJsonFlag('{"k":["\\ud800"]}'), /^InvalidArgumentError: k\[0\] holds a lone UTF-16 surrogate/);
});

void test("--payload with a number past double range is refused where it is, not sent as null", () => {
  for (const [text, where] of [
    ["1e400", /^the value is a number outside the range/],
    ['{"a":[1,-1e400]}', /^a\[1\] is a number outside the range/],
    ['{"bad key":{"n":1e999}}', /^\["bad key"\]\.n is a number outside the range/],
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
    (err: unknown) => err instanceof InvalidArgumentError && /^(\[0\])+\.\.\. is nested more than 128 levels deep\.$/.test(err.message),
  );
  assert.equal((parseJsonFlag("[".repeat(128) + "]".repeat(128)) as unknown[]).length, 1);
});
