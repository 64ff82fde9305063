/**
 * The workflow types a run can have (spec, "Versioning"): `runs.workflow` and the `workflow` field
 * of every `run.*` event. A script run is `flowsvc/script/v1`; a pipeline run `flowsvc/pipeline/v1`
 * (its source is the YAML, the graph it compiles to is kept beside it); a graph run
 * `flowsvc-graph/v1` (its source is the graph document). Pipelines and graphs both run on the
 * graph engine: every "is this run driven by the graph engine" question goes through
 * `isGraphEngineWorkflow` (or its SQL list), never a string compare of its own.
 */

/** The workflow name of a run made from one script (`flow submit f.sh`). */
export const SCRIPT_WORKFLOW = "flowsvc/script/v1";
/** The workflow name of a run made from a YAML pipeline. */
export const PIPELINE_WORKFLOW = "flowsvc/pipeline/v1";
/** The workflow name of a run of a graph document (the document's `version`, core's GRAPH_VERSION). */
export const GRAPH_WORKFLOW = "flowsvc-graph/v1";

/** The workflows the graph engine (the controller's graph driver) runs: no script job, nodes in `graph_nodes`. */
export const GRAPH_ENGINE_WORKFLOWS: readonly string[] = [GRAPH_WORKFLOW, PIPELINE_WORKFLOW];

/** Whether a run of this workflow is driven by the graph engine (a graph or a pipeline). */
export const isGraphEngineWorkflow = (workflow: string | undefined | null): boolean =>
  workflow !== undefined && workflow !== null && GRAPH_ENGINE_WORKFLOWS.includes(workflow);

/** GRAPH_ENGINE_WORKFLOWS as a SQL list, for `workflow in (...)` (constants only: nothing from outside). */
export const GRAPH_ENGINE_WORKFLOWS_SQL = GRAPH_ENGINE_WORKFLOWS.map((w) => `'${w}'`).join(", ");
