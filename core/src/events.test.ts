import { test } from "node:test";
import assert from "node:assert/strict";
import {
  CHAIN_DEPTH_LIMIT,
  EMIT_BODY_LIMIT,
  HANDLER_RUNS_IN_FLIGHT_LIMIT,
  PLATFORM_EVENT_TYPES,
  assertEmittable,
  isReservedType,
  matchesAny,
  matchesPattern,
  parsePatterns,
  validateEventType,
  validatePattern,
} from "./events.js";
import { FlowError } from "./errors.js";

const invalidArgument = (fn: () => unknown, message: RegExp): void => {
  assert.throws(fn, (e: unknown) => e instanceof FlowError && e.code === "invalid_argument" && message.test(e.message));
};

void test("event types are 1-64 characters from [A-Za-z0-9._-]", () => {
  for (const ok of ["a", "deploy.requested", "Build_1-done", "x".repeat(64), "gh.pull_request.opened"]) {
    assert.equal(validateEventType(ok), ok);
  }
  for (const bad of ["", "x".repeat(65), "has space", "a/b", "ünï", "a*", "a\n"]) {
    invalidArgument(() => validateEventType(bad), /must be 1-64 characters from \[A-Za-z0-9._-\]/);
  }
  invalidArgument(() => validateEventType(42), /type: event type number must be/);
  invalidArgument(() => validateEventType(undefined), /event type undefined must be/);
});

void test("platform types cannot be emitted by anyone else", () => {
  for (const type of ["push", "manual", "schedule.tick", "spawn", "run.failed", "run.anything", "flow.x", "Run.failed", "PUSH"]) {
    assert.equal(isReservedType(type), true, type);
    invalidArgument(() => assertEmittable(type), /is reserved for the platform/);
  }
  for (const type of ["deploy", "pushed", "push.x", "runner.done", "run", "flow", "gh.push", "schedule"]) {
    assert.equal(isReservedType(type), false, type);
    assert.equal(assertEmittable(type), type);
  }
  invalidArgument(() => assertEmittable("bad type"), /must be 1-64 characters/);
});

void test("every platform type is reserved and described for the catalog", () => {
  const types = Object.keys(PLATFORM_EVENT_TYPES);
  assert.deepEqual(types.sort(), [
    "manual",
    "push",
    "run.awaiting",
    "run.cancelled",
    "run.failed",
    "run.started",
    "run.succeeded",
    "run.wait_expired",
    "schedule.tick",
    "spawn",
  ]);
  for (const [type, description] of Object.entries(PLATFORM_EVENT_TYPES)) {
    assert.equal(isReservedType(type), true, type);
    assert.ok(description.length > 10 && !description.includes("\n"), type);
  }
});

void test("handler patterns are an exact type, prefix.* or *", () => {
  for (const ok of ["*", "deploy", "run.*", "gh.pull_request.*", "a.b"]) assert.equal(validatePattern(ok), ok);
  for (const bad of ["", ".*", "a*", "*.x", "a.*.b", "run.**", "a b", "**", 7]) {
    invalidArgument(() => validatePattern(bad), /must be an event type, a prefix wildcard like run\.\*, or \*/);
  }
});

void test("--on lists are split on commas, trimmed and deduplicated", () => {
  assert.deepEqual(parsePatterns("a,b.*"), ["a", "b.*"]);
  assert.deepEqual(parsePatterns(" run.succeeded , run.failed,run.succeeded "), ["run.succeeded", "run.failed"]);
  assert.deepEqual(parsePatterns("*"), ["*"]);
  invalidArgument(() => parsePatterns(""), /has an empty pattern/);
  invalidArgument(() => parsePatterns("a,,b"), /has an empty pattern/);
  invalidArgument(() => parsePatterns("a,b c"), /pattern "b c" must be/);
});

void test("patterns match by type only", () => {
  assert.equal(matchesPattern("*", "anything.at.all"), true);
  assert.equal(matchesPattern("deploy", "deploy"), true);
  assert.equal(matchesPattern("deploy", "deploy.done"), false);
  assert.equal(matchesPattern("run.*", "run.failed"), true);
  assert.equal(matchesPattern("gh.*", "gh.pull_request.opened"), true);
  assert.equal(matchesPattern("run.*", "run"), false);
  assert.equal(matchesPattern("run.*", "runner.done"), false);
  assert.equal(matchesAny(["run.succeeded", "run.failed", "run.cancelled"], "run.failed"), true);
  assert.equal(matchesAny(["run.succeeded", "run.failed", "run.cancelled"], "run.started"), false);
  assert.equal(matchesAny([], "x"), false);
});

void test("bus limits follow the spec", () => {
  assert.equal(EMIT_BODY_LIMIT, 2_097_152);
  assert.equal(CHAIN_DEPTH_LIMIT, 5);
  assert.equal(HANDLER_RUNS_IN_FLIGHT_LIMIT, 16);
});
