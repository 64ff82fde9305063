/** `flow submit p.yaml`: which files are pipelines, and the body sent (pure functions, no server). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "@flowsvc/core/errors";
import { parseJsonFlag } from "./parsers.js";
import { graphSubmitBody, isGraphSubmit, isPipelineSubmit } from "./submit.js";

void test("a .yaml/.yml file is a pipeline unless --as says otherwise; --as pipeline|yaml makes any file one", () => {
  assert.equal(isPipelineSubmit("ci.yaml", undefined), true);
  assert.equal(isPipelineSubmit("CI.YML", undefined), true);
  assert.equal(isPipelineSubmit("ci.yaml", "script"), false);
  assert.equal(isPipelineSubmit("p.txt", "pipeline"), true);
  assert.equal(isPipelineSubmit("p.txt", "yaml"), true);
  assert.equal(isPipelineSubmit("deploy.sh", undefined), false);
  assert.equal(isGraphSubmit("ci.yaml", undefined), false);
});

void test("the pipeline body: as pipeline, the source, the base name, input parsed; --credential and script-only flags refused", () => {
  assert.deepEqual(graphSubmitBody("dir/ci.yaml", "jobs: {}", { input: '{"ref":"main"}', tag: ["ci"] }, "pipeline"), {
    as: "pipeline",
    source: "jobs: {}",
    filename: "ci.yaml",
    input: { ref: "main" },
    tags: ["ci"],
  });
  assert.throws(
    () => graphSubmitBody("ci.yaml", "", { credential: ["T=tok"] }, "pipeline"),
    /--credential is refused on a pipeline submit/,
  );
  assert.throws(
    () => graphSubmitBody("ci.yaml", "", { interpreter: "bash" }, "pipeline"),
    /--interpreter applies to scripts; a pipeline declares/,
  );
});

void test("--input and a JSON flag (--payload) refuse what JSON.parse would change before sending: 1e400 (sent as null), a NUL, a lone surrogate", () => {
  const refusedInput = (input: string, want: RegExp): void => {
    assert.throws(
      () => graphSubmitBody("ci.yaml", "jobs: {}", { input }, "pipeline"),
      (e: unknown) => e instanceof FlowError && e.code === "invalid_argument" && want.test(e.message),
    );
  };
  refusedInput('{"a": 1e400}', /^--input: a is a number outside the range a JSON number can be stored in/);
  refusedInput("[1, -1e999]", /^--input: \[1\] is a number outside the range/);
  refusedInput('{"a": "x\\u0000y"}', /^--input: a holds a NUL character/);
  refusedInput('{"a": ["x\\ud800"]}', /^--input: a\[0\] holds a lone UTF-16 surrogate/);
  refusedInput("{nope", /^--input: not valid JSON/);
  refusedInput(`${"[".repeat(200)}${"]".repeat(200)}`, /^--input: (\[0\]){26}\.\.\. is nested more than 128 levels deep$/);
  assert.deepEqual(graphSubmitBody("ci.yaml", "jobs: {}", { input: '{"n": 1e308}' }, "pipeline").input, { n: 1e308 });
  assert.throws(() => parseJsonFlag('{"v": 1e400}'), /: v is a number outside the range/);
  assert.deepEqual(parseJsonFlag('{"v": [1.5, "\\ud83d\\ude00"]}'), { v: [1.5, "😀"] });
});
