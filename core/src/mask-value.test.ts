import { test } from "node:test";
import assert from "node:assert/strict";
import { createMasker } from "./mask.js";
import { createValueMasker } from "./mask-value.js";

const SECRET = "s3cr3t-Välue-€-4711";

/** The stream masker fed the whole text at once and ended: the reference a one-shot mask must equal. */
const streamed = (values: readonly string[], text: string): string => {
  const m = createMasker(values);
  const head = m.push(new TextEncoder().encode(text));
  const tail = m.end();
  return new TextDecoder().decode(Buffer.concat([head, tail]));
};

void test("a whole string is masked as the stream masker masks it: whole, trimmed, multi-line, overlapping, touching", () => {
  const values = [SECRET, "  padded-value  ", "line-one-alpha\nline-two-beta\nxy", "abcdef", "cdefgh"];
  const m = createValueMasker(values);
  const cases = [
    `a ${SECRET} b`,
    `${SECRET}${SECRET}`,
    "x padded-value y",
    "cert line-two-beta and line-one-alpha; xy stays",
    "abcdefgh and abcdef-cdefgh",
    "nothing here",
    "",
  ];
  for (const text of cases) assert.equal(m.text(text), streamed(values, text), text);
  assert.equal(m.text(`a ${SECRET} b`), "a *** b");
  assert.equal(m.text("abcdefgh"), "***");
  assert.equal(m.text("cert line-two-beta; xy"), "cert ***; xy");
});

void test("the longest value wins: no tail of a longer secret shows", () => {
  const m = createValueMasker(["secret", "secret-long"]);
  assert.equal(m.text("[secret-long]"), "[***]");
  assert.equal(m.text("[secret-longer]"), "[***er]");
});

void test("every string of a JSON value is masked, keys too, at any depth, and the input is not changed", () => {
  const m = createValueMasker([SECRET]);
  const input = { top: SECRET, nested: { list: ["x", `pre-${SECRET}`, 3, null, true] }, [SECRET]: 1, ["__proto__"]: SECRET };
  const before = JSON.stringify(input);
  const out = m.json(input);
  assert.equal(JSON.stringify(input), before);
  assert.ok(!JSON.stringify(out).includes(SECRET));
  assert.deepEqual(JSON.parse(JSON.stringify(out)), {
    top: "***",
    nested: { list: ["x", "pre-***", 3, null, true] },
    "***": 1,
    ["__proto__"]: "***",
  });
  assert.equal(Object.getPrototypeOf(out), Object.prototype, "a __proto__ key stays a key");
  assert.equal(m.json(SECRET), "***");
  assert.equal(m.json(42), 42);
});

void test("a payload nested 10,000 deep is masked without a stack overflow", () => {
  const m = createValueMasker([SECRET]);
  let value: unknown = SECRET;
  for (let i = 0; i < 10_000; i++) value = i % 2 ? [value] : { [`k${i}`]: value };
  let out = m.json(value);
  for (let i = 9_999; i >= 0; i--) out = i % 2 ? (out as unknown[])[0] : (out as Record<string, unknown>)[`k${i}`];
  assert.equal(out, "***");
});

void test("hostile strings: NUL bytes and lone surrogates mask around, and no secrets means the value as is", () => {
  const m = createValueMasker(["a\u0000b-secret", "\ud800-lone-secret"]);
  assert.equal(m.text("x a\u0000b-secret y \ud800-lone-secret z"), "x *** y *** z");
  const none = createValueMasker(["", "   "]);
  assert.equal(none.active, true, "whitespace-only values are registered whole, as the stream masker does");
  const empty = createValueMasker([""]);
  assert.equal(empty.active, false);
  const v = { a: 1 };
  assert.equal(empty.json(v), v);
});
