/**
 * Property-based tests of CEL in `--when` (issue 15, item 5): any source text either compiles or
 * is refused with invalid_argument saying what and where, and a compiled predicate evaluates any
 * JSON event to a result or a declined error, never a throw, each case within a bound. Seeded and
 * bounded: a failure prints fast-check's seed and path, which replay it (`fc.assert(p, { seed, path })`).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { CEL_SOURCE_LIMIT, compileCel, evaluatePredicate } from "./cel.js";
import { FlowError } from "./errors.js";

/** Generous on a loaded 2-core host: the worst `matches()` measured takes 0.25 s. */
const CASE_MS = 5000;

const TOKENS = [
  "event",
  "event.type",
  "event.key",
  "event.payload",
  "event.payload.a",
  ".",
  "==",
  "!=",
  "<",
  ">=",
  "&&",
  "||",
  "!",
  "?",
  ":",
  "(",
  ")",
  "[",
  "]",
  "{",
  "}",
  ",",
  "+",
  "-",
  "*",
  "/",
  "%",
  "in",
  "has(",
  "size(",
  "int(",
  "uint(",
  "double(",
  "string(",
  "bytes(",
  "matches(",
  ".matches(",
  ".startsWith(",
  ".exists(x, ",
  ".all(x, ",
  "x",
  "'x'",
  "'a*b+'",
  "'(a+)+$'",
  "'\\\\1'",
  '"',
  "'",
  "'''",
  "b'\\xff'",
  "r'\\d'",
  "0",
  "1",
  "-1",
  "1.5",
  "1e400",
  "0x1F",
  "1u",
  "9223372036854775808",
  "-9223372036854775809",
  "true",
  "null",
  "\\",
  "\u0000",
  "\ud800",
  "\n",
  " ",
  "%41",
];

/** Token soup: mostly near-CEL, so the parser, the checker and the evaluator are all reached. */
const celSoup = fc.array(fc.constantFrom(...TOKENS), { minLength: 1, maxLength: 24 }).map((t) => t.join(""));
/** Well-formed expressions of any type, so the checker and the evaluator see more than parse errors. */
const { expr: celExpr } = fc.letrec<{ expr: string; atom: string }>((tie) => ({
  atom: fc.constantFrom(
    "event",
    "event.type",
    "event.key",
    "event.payload",
    "event.payload.a",
    "event.payload.a.b",
    "event.payload[0]",
    "event.payload['k']",
    "'x'",
    "1",
    "-1",
    "1u",
    "2.5",
    "true",
    "null",
    "[1, 'a']",
    "{'a': 1}",
    "b'\\xff'",
    "9223372036854775807",
  ),
  expr: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    tie("atom"),
    fc
      .tuple(tie("expr"), fc.constantFrom("==", "!=", "<", "+", "-", "*", "/", "%", "&&", "||", " in "), tie("expr"))
      .map(([a, op, b]) => `(${a} ${op} ${b})`),
    fc
      .tuple(fc.constantFrom("!", "-", "size(", "int(", "uint(", "double(", "string(", "has(", "type("), tie("expr"))
      .map(([f, a]) => (f.endsWith("(") ? `${f}${a})` : `${f}${a}`)),
    fc
      .tuple(tie("expr"), fc.constantFrom(".startsWith(", ".endsWith(", ".contains(", ".matches("), tie("expr"))
      .map(([a, m, b]) => `${a}${m}${b})`),
    fc.tuple(tie("expr"), tie("expr"), tie("expr")).map(([a, b, c]) => `(${a} ? ${b} : ${c})`),
    fc
      .tuple(tie("expr"), fc.constantFrom(".exists(x, ", ".all(x, ", ".map(x, ", ".filter(x, "), tie("expr"))
      .map(([a, m, b]) => `${a}${m}${b})`),
  ),
}));
const celCode = fc.oneof(celSoup, celExpr);
const celText = fc.oneof(celCode, fc.string({ maxLength: 200, unit: "binary" }), fc.string({ maxLength: 64 }));

interface Outcome {
  compiled?: ReturnType<typeof compileCel>;
}

/** Compiles `source`: a compiled expression, or a refusal that must be invalid_argument with a message. */
const compileOrRefuse = (source: string): Outcome => {
  try {
    return { compiled: compileCel(source) };
  } catch (e) {
    assert.ok(e instanceof FlowError, `compileCel(${JSON.stringify(source)}) threw a non-FlowError: ${String(e)}`);
    assert.equal(e.code, "invalid_argument");
    assert.ok(e.message.length > 0 && e.message.length < 2000, `a refusal says what was wrong: ${JSON.stringify(e.message)}`);
    return {};
  }
};

const bounded = (what: string, fn: () => void): void => {
  const t0 = performance.now();
  fn();
  const ms = performance.now() - t0;
  assert.ok(ms < CASE_MS, `${what} took ${Math.round(ms)} ms (bound ${CASE_MS} ms)`);
};

void test("any source text compiles or is refused with invalid_argument, within the bound", () => {
  fc.assert(
    fc.property(celText, (source) => bounded(`compiling ${JSON.stringify(source)}`, () => void compileOrRefuse(source))),
    { seed: 1501, numRuns: 1500 },
  );
});

void test("a refusal of a parse error names its line and column", () => {
  fc.assert(
    fc.property(celSoup, (source) => {
      try {
        compileCel(source);
      } catch (e) {
        const message = (e as Error).message;
        // Limits (length, depth, matches patterns) are whole-expression refusals; a syntax error has a place.
        if (/^(Unexpected|Unterminated|Invalid)/.test(message)) assert.match(message, /at line \d+, column \d+/);
      }
    }),
    { seed: 1502, numRuns: 800 },
  );
});

void test("a compiled predicate evaluates any JSON event to a match or a declined error, never a throw", () => {
  const events = fc.record({ type: fc.string(), key: fc.option(fc.string()), payload: fc.jsonValue({ maxDepth: 4 }) });
  fc.assert(
    fc.property(celCode, events, (source, event) => {
      const { compiled } = compileOrRefuse(source);
      if (!compiled) return;
      bounded(`evaluating ${JSON.stringify(source)}`, () => {
        const r = evaluatePredicate(compiled, { event });
        assert.equal(typeof r.matched, "boolean");
        if (r.error !== undefined) assert.ok(r.error.length > 0);
      });
    }),
    { seed: 1503, numRuns: 1500 },
  );
});

void test("matches() with any pattern on any subject compiles or is refused, and evaluates within the bound", () => {
  const pattern = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc
      .array(fc.constantFrom("a", "b", ".", "*", "+", "?", "|", "(", ")", "[", "]", "{2,5}", "^", "$", "\\d", "\\w", "\\1", "(?="), {
        maxLength: 16,
      })
      .map((t) => t.join("")),
  );
  const subject = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.nat({ max: 70_000 }).map((n) => "a".repeat(n) + "!"),
  );
  fc.assert(
    fc.property(pattern, subject, (p, s) => {
      const { compiled } = compileOrRefuse(`event.payload.s.matches(${JSON.stringify(p)})`);
      if (!compiled) return;
      bounded(
        `matches(${JSON.stringify(p)}) on ${s.length} characters`,
        () => void evaluatePredicate(compiled, { event: { payload: { s } } }),
      );
    }),
    { seed: 1504, numRuns: 300 },
  );
});

void test("a source at and past the length limit: the limit is named, never a parser stack overflow", () => {
  fc.assert(
    fc.property(fc.constantFrom("(", "[", "!", "-", "event.a."), fc.integer({ min: 1, max: 3 * CEL_SOURCE_LIMIT }), (unit, n) => {
      bounded(`${n} x ${unit}`, () => void compileOrRefuse(unit.repeat(Math.ceil(n / unit.length)).slice(0, n) + "1"));
    }),
    { seed: 1505, numRuns: 200 },
  );
});
