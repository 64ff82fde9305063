import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "./errors.js";
import { formatDuration, parseDuration } from "./duration.js";

const S = 1000;
const M = 60 * S;
const H = 60 * M;
const D = 24 * H;

void test("the spec's examples parse to milliseconds", () => {
  assert.equal(parseDuration("5s"), 5 * S);
  assert.equal(parseDuration("1m"), M);
  assert.equal(parseDuration("2h"), 2 * H);
  assert.equal(parseDuration("30d"), 30 * D);
  assert.equal(parseDuration("0s"), 0);
  assert.equal(parseDuration("250ms"), 250);
});

void test("every humantime unit spelling is understood", () => {
  const cases: Array<[string[], number]> = [
    [["7ms", "7msec", "7millis"], 7],
    [["3s", "3sec", "3secs", "3second", "3seconds"], 3 * S],
    [["2m", "2min", "2mins", "2minute", "2minutes"], 2 * M],
    [["4h", "4hr", "4hrs", "4hour", "4hours"], 4 * H],
    [["1d", "1day", "1days"], D],
    [["2w", "2week", "2weeks"], 14 * D],
    [["1M", "1month", "1months"], 2_630_016 * S],
    [["1y", "1year", "1years"], 31_557_600 * S],
    [["5000us", "5000usec", "5000µs", "5000000ns", "5000000nsec", "5000000nanos"], 5],
  ];
  for (const [spellings, ms] of cases) for (const s of spellings) assert.equal(parseDuration(s), ms, s);
});

void test("units are case-sensitive: m is minutes and M is months", () => {
  assert.equal(parseDuration("1m"), M);
  assert.equal(parseDuration("1M"), 2_630_016 * S);
  assert.throws(() => parseDuration("1H"), /unknown unit "H"/);
});

void test("terms can be joined with or without spaces", () => {
  assert.equal(parseDuration("1h30m"), H + 30 * M);
  assert.equal(parseDuration("1h 30m"), H + 30 * M);
  assert.equal(parseDuration("2 hours 1 min"), 2 * H + M);
  assert.equal(parseDuration("  1d2h3m4s5ms  "), D + 2 * H + 3 * M + 4 * S + 5);
  assert.equal(parseDuration("5 s"), 5 * S);
  assert.equal(parseDuration("1m1m"), 2 * M);
});

void test("a sub-millisecond remainder rounds up, so a non-zero duration is never 0", () => {
  assert.equal(parseDuration("1ns"), 1);
  assert.equal(parseDuration("500us"), 1);
  assert.equal(parseDuration("1500us"), 2);
  assert.equal(parseDuration("1s 1ns"), 1001);
  assert.equal(parseDuration("0ns"), 0);
});

const refused = (text: string, why: RegExp): void => {
  assert.throws(
    () => parseDuration(text),
    (err: unknown) => {
      assert.ok(err instanceof FlowError, String(err));
      assert.equal(err.code, "invalid_argument");
      assert.ok(err.message.startsWith(`invalid duration ${JSON.stringify(text)}: `), err.message);
      assert.match(err.message, why);
      assert.match(err.message, /use e\.g\. 30s, 5m, 2h, 1d$/);
      return true;
    },
    text,
  );
};

void test("bad durations are refused with what was wrong and an example", () => {
  refused("", /it is empty/);
  refused("   ", /it is empty/);
  refused("5", /the number 5 has no unit/);
  refused("1h30", /the number 30 has no unit/);
  refused("5x", /unknown unit "x"/);
  refused("5 parsecs", /unknown unit "parsecs"/);
  refused("-1s", /cannot be negative/);
  refused("1.5h", /fractions are not supported/);
  refused("0,5s", /fractions are not supported/);
  refused("h", /expected a number at position 0/);
  refused("5s!", /expected a number at position 2, found "!"/);
  refused("1 0s", /the number 1 has no unit/);
  refused("+5s", /unexpected "\+"/);
  refused("99999999999999999999y", /too large/);
});

void test("durations format compactly, largest unit first", () => {
  assert.equal(formatDuration(0), "0s");
  assert.equal(formatDuration(250), "250ms");
  assert.equal(formatDuration(5 * S), "5s");
  assert.equal(formatDuration(H + 30 * M), "1h30m");
  assert.equal(formatDuration(30 * D), "30d");
  assert.equal(formatDuration(2 * D + 3 * H + 4 * S + 5), "2d3h4s5ms");
  assert.equal(formatDuration(0.2), "1ms");
});

void test("a formatted duration parses back to the same milliseconds", () => {
  let seed = 7;
  for (let i = 0; i < 2000; i++) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    const ms = i < 1000 ? seed % (3 * D) : seed * 977;
    assert.equal(parseDuration(formatDuration(ms)), ms, String(ms));
  }
});

void test("negative or non-finite numbers are refused by formatDuration", () => {
  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(
      () => formatDuration(bad),
      (err: unknown) => err instanceof FlowError && err.code === "invalid_argument",
    );
  }
});
