/** `flow submit graph.json`: which files are graphs, and the body sent (pure functions, no server). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { graphSubmitBody, isGraphSubmit } from "./submit.js";

void test("a .json file is a graph unless --as says otherwise; --as graph makes any file one", () => {
  assert.equal(isGraphSubmit("deploy.json", undefined), true);
  assert.equal(isGraphSubmit("DIR/Deploy.JSON", undefined), true);
  assert.equal(isGraphSubmit("deploy.json", "script"), false);
  assert.equal(isGraphSubmit("deploy.sh", undefined), false);
  assert.equal(isGraphSubmit("graph.txt", "graph"), true);
});

void test("the body: as graph, the source, the base name, input parsed, idempotency key and tags", () => {
  assert.deepEqual(graphSubmitBody("some/dir/g.json", "{}", { input: '{"who":"ada","n":[1,2]}', idempotencyKey: "k", tag: ["a"] }), {
    as: "graph",
    source: "{}",
    filename: "g.json",
    input: { who: "ada", n: [1, 2] },
    idempotency_key: "k",
    tags: ["a"],
  });
  assert.deepEqual(graphSubmitBody("g.json", "{}", {}), { as: "graph", source: "{}", filename: "g.json", tags: [] });
});

void test("bad --input and script-only flags are refused before anything is sent", () => {
  assert.throws(() => graphSubmitBody("g.json", "{}", { input: "{nope" }), /--input: not valid JSON/);
  // JSON.parse reads 1e400 as Infinity, which JSON.stringify would send as null: refused at its place instead.
  assert.throws(() => graphSubmitBody("g.json", "{}", { input: '{"a":[1e400]}' }), /--input: a\[0\] is a number outside the range/);
  assert.throws(() => graphSubmitBody("g.json", "{}", { input: '{"a":"\\ud800"}' }), /--input: a holds a lone UTF-16 surrogate/);
  assert.throws(() => graphSubmitBody("g.json", "{}", { interpreter: "python3" }), /--interpreter applies to scripts/);
  assert.throws(() => graphSubmitBody("g.json", "{}", { env: { A: "1" } }), /--env applies to scripts/);
  assert.throws(() => graphSubmitBody("g.json", "{}", { credential: ["GH=gh"] }), /--credential applies to scripts/);
  assert.throws(() => graphSubmitBody("g.json", "{}", { retry: { attempts: 2, backoff_ms: 0 } }), /--retry applies to scripts/);
});
