import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "./errors.js";
import { JSON_DEPTH_LIMIT, assertStorableJson, findJsonProblem, textProblem } from "./json-guard.js";

const nested = (depth: number): unknown => JSON.parse("[".repeat(depth) + "]".repeat(depth));

void test("text with NUL or a lone surrogate cannot be stored; paired surrogates and other controls can", () => {
  assert.match(textProblem("a\0b") ?? "", /NUL/);
  assert.match(textProblem("x\ud800y") ?? "", /lone UTF-16 surrogate/);
  assert.match(textProblem("x\udc00") ?? "", /lone UTF-16 surrogate/);
  assert.match(textProblem("\ud800") ?? "", /lone UTF-16 surrogate/);
  assert.equal(textProblem("emoji \ud83d\ude00 and \u0001 and \uffff"), undefined);
  assert.equal(textProblem(""), undefined);
});

void test("the first problem is found in document order and named by its JSON path", () => {
  const value = JSON.parse('{"a":[1,{"b":"ok"},{"c":"x\\u0000"}],"d":"\\ud800"}') as unknown;
  assert.deepEqual(findJsonProblem(value), {
    path: "body.a[2].c",
    problem: "holds a NUL character (U+0000), which cannot be stored",
    kind: "text",
  });
  assert.deepEqual(findJsonProblem({ "odd key": { "k\ud800": 1 } }, "body.payload")?.path, 'body.payload["odd key"]["k\\ud800"]');
  assert.match(findJsonProblem({ "k\0": 1 })?.problem ?? "", /has a key that holds a NUL/);
  assert.deepEqual(findJsonProblem("a\0"), {
    path: "body",
    problem: "holds a NUL character (U+0000), which cannot be stored",
    kind: "text",
  });
  assert.equal(findJsonProblem({ a: [1, true, null, "fine", { b: 2.5 }] }), undefined);
});

void test("nesting up to the limit is taken, one more level is refused, and 100,000 levels do not overflow the stack", () => {
  assert.equal(findJsonProblem(nested(JSON_DEPTH_LIMIT)), undefined);
  assert.match(findJsonProblem(nested(JSON_DEPTH_LIMIT + 1))?.problem ?? "", new RegExp(`nested more than ${JSON_DEPTH_LIMIT} levels`));
  assert.match(findJsonProblem(nested(100_000))?.problem ?? "", /nested more than/);
  const deepObject = JSON.parse('{"a":'.repeat(100_000) + "1" + "}".repeat(100_000)) as unknown;
  assert.ok(findJsonProblem(deepObject)?.path.startsWith("body.a.a.a"));
});

void test("a real GitHub-sized payload passes", () => {
  const pr = {
    action: "opened",
    pull_request: { head: { repo: { owner: { login: "u" }, license: { key: "mit" } } }, labels: [{ name: "x" }] },
    repository: { full_name: "a/b" },
  };
  assert.equal(findJsonProblem({ body: pr, query: {} }), undefined);
});

void test("assertStorableJson throws invalid_argument naming the place, with a short message for deep paths", () => {
  assert.throws(
    () => assertStorableJson({ payload: { m: "x\ud800" } }),
    (e: unknown) => e instanceof FlowError && e.code === "invalid_argument" && /^body\.payload\.m holds a lone/.test(e.message),
  );
  assert.throws(
    () => assertStorableJson(nested(5000)),
    (e: unknown) => e instanceof FlowError && e.message.length < 200 && e.details?.["depth_limit"] === JSON_DEPTH_LIMIT,
  );
  const ok = { a: 1 };
  assert.equal(assertStorableJson(ok), ok);
});

void test("a number past double range (1e400 parses to Infinity) is refused at its path, not stored as null", () => {
  const value = JSON.parse('{"payload":{"ok":1e308,"tiny":1e-400,"list":[0,-1e400]}}') as unknown;
  assert.deepEqual(findJsonProblem(value), {
    path: "body.payload.list[1]",
    problem: "is a number outside the range a JSON number can be stored in (about ±1.8e308; it would become null)",
    kind: "number",
  });
  assert.equal(findJsonProblem(JSON.parse("1e400"), "body")?.path, "body");
  assert.equal(findJsonProblem({ n: Number.NaN })?.path, "body.n");
  assert.throws(
    () => assertStorableJson(JSON.parse('{"payload":{"big":1e400}}'), "body"),
    (e: unknown) => e instanceof FlowError && e.code === "invalid_argument" && /^body\.payload\.big is a number outside/.test(e.message),
  );
  assert.equal(findJsonProblem({ n: Number.MAX_VALUE, m: -Number.MAX_VALUE, z: -0 }), undefined);
});

void test("a __proto__ key (an own key after JSON.parse) is refused at its place, at any depth; a key that only contains it is not", () => {
  const doc = JSON.parse('{"nodes":[{"config":{"type":"x.y","__proto__":{"polluted":true}}}]}') as unknown;
  const found = findJsonProblem(doc, "(document)");
  assert.equal(found?.path, "(document).nodes[0].config.__proto__");
  assert.match(found?.problem ?? "", /^has a key that is "__proto__" \(refused/);
  assert.equal(({} as Record<string, unknown>)["polluted"], undefined);
  assert.equal(findJsonProblem(JSON.parse('{"__proto__x":1,"a__proto__":{"constructor":{"prototype":1}}}')), undefined);
});
