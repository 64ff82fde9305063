/** `flow submit p.yaml`: which files are pipelines, and the body sent (pure functions, no server). */
import { test } from "node:test";
import assert from "node:assert/strict";
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
