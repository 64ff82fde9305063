import { test } from "node:test";
import assert from "node:assert/strict";
import { GRAPH_VERSION } from "./graph/model.js";
import { PIPELINE_VERSION } from "./pipeline/model.js";
import { GRAPH_ENGINE_WORKFLOWS_SQL, GRAPH_WORKFLOW, PIPELINE_WORKFLOW, SCRIPT_WORKFLOW, isGraphEngineWorkflow } from "./workflow-types.js";

void test("script, pipeline and graph runs carry the spec's workflow type identifiers", () => {
  assert.equal(SCRIPT_WORKFLOW, "flowsvc/script/v1");
  assert.equal(PIPELINE_WORKFLOW, "flowsvc/pipeline/v1");
  assert.equal(PIPELINE_WORKFLOW, PIPELINE_VERSION);
  assert.equal(GRAPH_WORKFLOW, GRAPH_VERSION);
});

void test("pipelines and graphs run on the graph engine; scripts and anything else do not", () => {
  assert.equal(isGraphEngineWorkflow(PIPELINE_WORKFLOW), true);
  assert.equal(isGraphEngineWorkflow(GRAPH_WORKFLOW), true);
  for (const other of [SCRIPT_WORKFLOW, "", "flowsvc/pipeline/v2", "FLOWSVC-GRAPH/V1", undefined, null])
    assert.equal(isGraphEngineWorkflow(other), false, String(other));
  assert.equal(GRAPH_ENGINE_WORKFLOWS_SQL, "'flowsvc-graph/v1', 'flowsvc/pipeline/v1'");
});
