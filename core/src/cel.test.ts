import { test } from "node:test";
import assert from "node:assert/strict";
import { CEL_DEPTH_LIMIT, CEL_SOURCE_LIMIT, MATCHES_PATTERN_LIMIT, compileCel, evaluatePredicate, inspectMatchesPattern } from "./cel.js";
import { FlowError } from "./errors.js";

const refused = (source: string, message: RegExp, opts?: { variables?: readonly string[]; predicate?: boolean }): void => {
  assert.throws(
    () => compileCel(source, opts),
    (e: unknown) => {
      assert.ok(e instanceof FlowError, String(e));
      assert.equal(e.code, "invalid_argument");
      assert.match(e.message, message);
      return true;
    },
  );
};

const when = (source: string, event: unknown) => evaluatePredicate(compileCel(source), { event });

void test("a predicate that does not compile is refused with the compiler's message and position", () => {
  refused("event.type ==", /^Unexpected token: EOF at line 1, column 14$/);
  refused('event.type == "a" &&\n  (event.key ==)', /^Unexpected token: RPAREN at line 2, column 16$/);
  refused("evnt.type == 'x'", /^Unknown variable: evnt at line 1, column 1$/);
});

void test("declared variables replace the default event", () => {
  const compiled = compileCel("input.n > 1 && nodes.a.status == 'ok'", { variables: ["input", "nodes"] });
  assert.deepEqual(compiled.evaluate({ input: { n: 2 }, nodes: { a: { status: "ok" } } }), { ok: true, value: true });
  refused("event.type == 'x'", /Unknown variable: event/, { variables: ["input"] });
});

void test("expression size and bracket depth are capped before parsing", () => {
  const long = `event.type == "${"a".repeat(CEL_SOURCE_LIMIT)}"`;
  refused(long, new RegExp(`^CEL expression is ${long.length} characters; the limit is ${CEL_SOURCE_LIMIT}$`));
  const deep = `${"(".repeat(CEL_DEPTH_LIMIT + 1)}true${")".repeat(CEL_DEPTH_LIMIT + 1)}`;
  refused(deep, /nests brackets deeper than 32 levels at line 1, column 33/);
  const ok = `${"[".repeat(CEL_DEPTH_LIMIT)}1${"]".repeat(CEL_DEPTH_LIMIT)} != []`;
  assert.doesNotThrow(() => compileCel(ok));
  // Brackets inside strings and comments do not count.
  assert.deepEqual(when(`event.s == "${"(".repeat(40)}" // ${"[".repeat(40)}\n`, { s: "(".repeat(40) }), { matched: true });
  refused("   ", /CEL expression is empty/);
});

void test("matches() needs a string literal pattern", () => {
  refused(
    "event.s.matches(event.p)",
    /^matches\(\) needs a string literal pattern, not a variable or an expression, at line 1, column 17$/,
  );
  refused("event.s.matches('^a' + 'b')", /needs a string literal pattern/);
  refused("event.paths.exists(p, p.matches(p))", /needs a string literal pattern/);
  assert.deepEqual(when("event.s.matches('^o/r$')", { s: "o/r" }), { matched: true });
});

void test("matches() patterns that are not RE2-safe are refused, naming the rule", () => {
  const cases: ReadonlyArray<readonly [string, RegExp]> = [
    ["(a+)+b", /repeated group may not contain a quantifier or an alternation/],
    ["(a*)*", /repeated group may not contain a quantifier/],
    ["(a|a)*", /repeated group may not contain a quantifier or an alternation/],
    ["(?:x|xy){2,}", /repeated group/],
    ["(\\w+)-\\1", /backreferences are not RE2-safe/],
    ["(?<n>a)\\k<n>", /backreferences/],
    ["foo(?=bar)", /lookahead and lookbehind are not RE2-safe/],
    ["foo(?!bar)", /lookahead and lookbehind/],
    ["(?<=a)b", /lookahead and lookbehind/],
    ["(?<!a)b", /lookahead and lookbehind/],
    ["a?".repeat(13), /ways to try; the limit is 4096/],
    ["a*b*c*d*e*", /5 unbounded repeats it could read only/],
    ["[a-", /not a valid regular expression/],
  ];
  for (const [pattern, message] of cases) {
    refused(`event.s.matches(${JSON.stringify(pattern)})`, message);
  }
  refused(
    `event.s.matches("${"a".repeat(MATCHES_PATTERN_LIMIT + 1)}")`,
    /pattern is 513 characters; the limit is 512 at line 1, column 17/,
  );
});

void test("ordinary patterns pass and anchoring raises the input limit", () => {
  for (const pattern of [
    "^refs/heads/",
    "^v[0-9]+\\.[0-9]+\\.[0-9]+(-[a-z0-9.]+)?$",
    "^(main|release-.*)$",
    "(?:ab)+",
    "[(|)]+",
    "\\(+x",
    "x{",
    "^docs/.*\\.md$",
  ]) {
    assert.doesNotThrow(() => inspectMatchesPattern(pattern), pattern);
  }
  assert.ok(inspectMatchesPattern("^.*x").inputLimit > inspectMatchesPattern(".*x").inputLimit);
  assert.ok(inspectMatchesPattern(".*x").inputLimit > inspectMatchesPattern(".*.*x").inputLimit);
});

void test("matches() refuses a subject longer than its pattern may read, and the evaluation declines", () => {
  const { inputLimit } = inspectMatchesPattern(".*.*x");
  const compiled = compileCel("event.s.matches('.*.*x')");
  assert.deepEqual(evaluatePredicate(compiled, { event: { s: "ax" } }), { matched: true });
  const started = Date.now();
  const result = evaluatePredicate(compiled, { event: { s: "a".repeat(inputLimit + 1) } });
  assert.equal(result.matched, false);
  assert.match(
    result.error ?? "",
    new RegExp(
      `^matches\\(\\) reads at most ${inputLimit} characters with this pattern; the string has ${inputLimit + 1} .* at line 1, column 1$`,
    ),
  );
  assert.ok(Date.now() - started < 1000, "refused before running the regex");
});

void test("matches() calls in a comprehension share one work budget", () => {
  const compiled = compileCel("event.paths.exists(p, p.matches('.*.*x'))");
  const paths = Array.from({ length: 2000 }, () => "a".repeat(400));
  const started = Date.now();
  const result = evaluatePredicate(compiled, { event: { paths } });
  assert.equal(result.matched, false);
  assert.match(result.error ?? "", /went over their work budget/);
  assert.ok(Date.now() - started < 5000);
  // A later evaluation starts with a fresh budget.
  assert.deepEqual(evaluatePredicate(compiled, { event: { paths: ["ax"] } }), { matched: true });
});

void test("JSON numbers compare with integer literals", () => {
  assert.deepEqual(when("event.count == 3", { count: 3 }), { matched: true });
  assert.deepEqual(when("event.count > 2 && event.count < 3.5", { count: 3 }), { matched: true });
  assert.equal(when("event.count + 1 == 4", { count: 3 }).matched, false);
  assert.deepEqual(when("int(event.count) + 1 == 4", { count: 3 }), { matched: true });
});

void test("reading an absent field is an error that declines; has() guards it", () => {
  const absent = when("event.payload.x == 1", { payload: {} });
  assert.equal(absent.matched, false);
  assert.match(absent.error ?? "", /^No such key: x at line 1, column 15$/);
  assert.deepEqual(when("has(event.payload.x) && event.payload.x == 1", { payload: {} }), { matched: false });
  assert.deepEqual(when("has(event.payload.x) && event.payload.x == 1", { payload: { x: 1 } }), { matched: true });
  // has() needs the intermediate object.
  assert.match(when("has(event.payload.a.b)", { payload: {} }).error ?? "", /No such key: a/);
  assert.match(when("event.constructor == 1", {}).error ?? "", /No such key: constructor/);
});

void test("a key and a payload field together", () => {
  const source = 'event.key == "o/r" && event.payload.n > 1';
  assert.deepEqual(when(source, { key: "o/r", payload: { n: 2 } }), { matched: true });
  assert.deepEqual(when(source, { key: "o/r", payload: { n: 1 } }), { matched: false });
  assert.deepEqual(when(source, { key: "x/y", payload: {} }), { matched: false });
});

void test("a non-bool result is an error, and evaluate never throws", () => {
  assert.deepEqual(when("event.payload", { payload: 1 }), { matched: false, error: "predicate returned double, not a bool" });
  assert.deepEqual(when("size(event.list)", { list: [1] }), { matched: false, error: "predicate returned int, not a bool" });
  assert.deepEqual(when("event.s", { s: "x" }), { matched: false, error: "predicate returned string, not a bool" });
  const compiled = compileCel("event.type");
  assert.deepEqual(compiled.evaluate({ event: { type: "x" } }), { ok: true, value: "x" });
  assert.equal(compiled.evaluate({}).ok, false);
  assert.equal(compiled.evaluate({ event: null }).ok, false);
});

void test("as a predicate, an expression the checker knows is not a bool is refused; a field read (dyn) is left to the event", () => {
  for (const [source, type] of [
    ['"prod"', "string"],
    ["1 + 2", "int"],
    ["[event.key]", "list"],
    ['size(event.type) > 0 ? "a" : "b"', "string"],
  ] as const) {
    refused(source, new RegExp(`^the expression is a ${type}, not a bool: a predicate must be true or false`), {
      predicate: true,
    });
    assert.equal(compileCel(source).source, source, "a value expression, not a predicate, is still taken");
  }
  for (const source of ["event.payload.ok", "has(event.key) && event.key == 'a'", "true"])
    assert.equal(compileCel(source, { predicate: true }).source, source);
});
