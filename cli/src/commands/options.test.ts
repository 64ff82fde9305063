import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError, parseJsonFlag } from "./parsers.js";
import { collectAssignment, collectEnv, parseEnvAssignment, parsePositiveInt, splitInterpreter } from "./options.js";

void test("--env splits at the first = and keeps the rest of the value", () => {
  assert.deepEqual(parseEnvAssignment("A=1"), ["A", "1"]);
  assert.deepEqual(parseEnvAssignment("URL=a=b"), ["URL", "a=b"]);
  assert.deepEqual(parseEnvAssignment("EMPTY="), ["EMPTY", ""]);
});

void test("--env without =, with an empty name or a name no shell accepts is refused", () => {
  for (const bad of ["NOEQUALS", "=value", "1ABC=x", "A-B=x"]) assert.throws(() => parseEnvAssignment(bad), InvalidArgumentError, bad);
});

void test("--env refuses by core's env rule, with the API's message: names that hijack a process, NUL, lone surrogates, huge names", () => {
  const cases: Array<[string, RegExp]> = [
    ["FLOW_TOKEN=x", /^env variable "FLOW_TOKEN" is refused: FLOW_\* variables are reserved/],
    ["FLOW_RUN_ID=x", /^env variable "FLOW_RUN_ID" is refused/],
    ["LD_PRELOAD=/tmp/x.so", /^env variable "LD_PRELOAD" is refused: the dynamic loader/],
    ["LD_AUDIT=/tmp/x.so", /^env variable "LD_AUDIT" is refused/],
    ["BASH_ENV=/tmp/x", /^env variable "BASH_ENV" is refused: a shell reads it/],
    ["PATH=/x", /^env variable "PATH" is refused: it decides which programs run/],
    ["A\u0000B=x", /^env variable "A\\u0000B" is not an environment variable name/],
    ["A\ud800=x", /^env variable "A\\ud800" is not an environment variable name/],
    ["=x", /^an env variable is empty\.$/],
    [`${"X".repeat(10_000)}=x`, /^an env variable is at most 100 characters; this one has 10000\.$/],
  ];
  for (const [text, want] of cases)
    assert.throws(
      () => parseEnvAssignment(text),
      (e: Error) => e instanceof InvalidArgumentError && want.test(e.message),
      text.slice(0, 20),
    );
  // `=` inside a name cannot be given: the first `=` ends the name.
  assert.deepEqual(parseEnvAssignment("A=B=C"), ["A", "B=C"]);
  assert.deepEqual(
    collectAssignment("LD_PRELOAD=cred", undefined),
    { LD_PRELOAD: "cred" },
    "--credential is checked by the server's credential rule",
  );
});

void test("repeated --env flags merge, the last value of a name winning", () => {
  assert.deepEqual(collectEnv("B=3", collectEnv("A=2", collectEnv("A=1", undefined))), { A: "2", B: "3" });
});

void test("--interpreter is split on whitespace and may not be empty", () => {
  assert.deepEqual(splitInterpreter("  python3   -u "), ["python3", "-u"]);
  assert.throws(() => splitInterpreter("   "), /--interpreter is empty/);
});

void test("--limit takes whole numbers of at least 1", () => {
  assert.equal(parsePositiveInt("20"), 20);
  for (const bad of ["0", "-1", "1.5", "x", ""]) assert.throws(() => parsePositiveInt(bad), InvalidArgumentError, bad);
});

void test("a JSON flag (--payload) is refused where a value cannot be sent as given: 1e400, a lone surrogate", () => {
  assert.deepEqual(parseJsonFlag('{"a":[1,"x"]}'), { a: [1, "x"] });
  assert.throws(
    () => parseJsonFlag('{"a":1e400}'),
    (e: Error) => e instanceof InvalidArgumentError && /^a is a number outside/.test(e.message),
  );
  assert.throws(
    () => parseJsonFlag('["\\udc00"]'),
    (e: Error) => e instanceof InvalidArgumentError && /^\[0\] holds a lone/.test(e.message),
  );
  assert.throws(
    () => parseJsonFlag("{nope"),
    (e: Error) => e instanceof InvalidArgumentError && /not valid JSON/.test(e.message),
  );
});
