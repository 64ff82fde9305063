import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError, parseJsonFlag } from "./parsers.js";
import { collectEnv, parseEnvAssignment, parsePositiveInt, splitInterpreter } from "./options.js";

void test("--env splits at the first = and keeps the rest of the value", () => {
  assert.deepEqual(parseEnvAssignment("A=1"), ["A", "1"]);
  assert.deepEqual(parseEnvAssignment("URL=a=b"), ["URL", "a=b"]);
  assert.deepEqual(parseEnvAssignment("EMPTY="), ["EMPTY", ""]);
});

void test("--env without =, with an empty name or a name no shell accepts is refused", () => {
  for (const bad of ["NOEQUALS", "=value", "1ABC=x", "A-B=x"]) assert.throws(() => parseEnvAssignment(bad), InvalidArgumentError, bad);
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
