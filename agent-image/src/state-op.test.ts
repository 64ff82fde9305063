import { test } from "node:test";
import assert from "node:assert/strict";
import { formatStateValue, parseStateValue, stateOutput } from "./state-op.js";

void test("a state value is JSON when it parses as JSON, the bare string otherwise", () => {
  assert.deepEqual(parseStateValue('{"a":[1,2]}'), { a: [1, 2] });
  assert.equal(parseStateValue("42"), 42);
  assert.equal(parseStateValue('"quoted"'), "quoted");
  assert.equal(parseStateValue("hello world"), "hello world");
  assert.equal(parseStateValue("{not json"), "{not json");
  assert.equal(parseStateValue(""), "");
});

void test("get prints a string raw and anything else as JSON, one line; nothing when unset", () => {
  assert.equal(stateOutput("get", { value: "v1", found: true }), "v1\n");
  assert.equal(stateOutput("get", { value: "ends\n", found: true }), "ends\n");
  assert.equal(stateOutput("get", { value: { a: 1 }, found: true }), '{"a":1}\n');
  assert.equal(stateOutput("get", { value: null, found: true }), "null\n");
  assert.equal(stateOutput("get", { found: false }), "");
  assert.equal(stateOutput("get", {}), "");
});

void test("list prints key<TAB>value lines; set and delete print nothing", () => {
  assert.equal(
    stateOutput("list", {
      items: [
        { key: "a", value: "x" },
        { key: "b", value: [1] },
      ],
    }),
    "a\tx\nb\t[1]\n",
  );
  assert.equal(stateOutput("list", { items: [] }), "");
  assert.equal(stateOutput("set", {}), "");
  assert.equal(stateOutput("delete", {}), "");
  assert.equal(formatStateValue(true), "true");
});
