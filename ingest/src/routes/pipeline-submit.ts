/**
 * A pipeline's submit through `POST {scoped}/runs` (issue 11: one engine): `{as: "pipeline",
 * source, filename, input?, idempotency_key?, tags?}`, what `flow submit p.yaml` sends. core's
 * pipeline compiler turns the YAML into a graph document (every refusal with the YAML line and
 * column); the graph is then submitted as any graph document is (graph-submit.ts: parseGraph, the
 * credential check, the run and its nodes), with the pipeline file's name, as a pipeline run
 * (`flowsvc/pipeline/v1`, its source the YAML; store's setupPipelineRun keeps the graph, `cancel_on`,
 * the job groups and joins the workflow group). A `credentials` field (`--credential`) is refused:
 * a pipeline names its credentials in its own `credentials:` maps.
 */
import { z } from "zod";
import { FlowError, graphDocumentText } from "@flowsvc/core";
import { PIPELINE_LIMITS, assertPipeline, runGroupOf } from "@flowsvc/core/pipeline";
import type { Pool } from "pg";
import type { Scope } from "../auth.js";
import { submitGraph } from "./graph-submit.js";

export const PipelineSubmission = z
  .object({
    as: z.literal("pipeline"),
    source: z.string().max(PIPELINE_LIMITS.textBytes, `source is over ${PIPELINE_LIMITS.textBytes} bytes`),
    filename: z.string().min(1).max(255),
    input: z.unknown().optional(),
    idempotency_key: z.string().min(1).max(255).optional(),
    tags: z.array(z.string().min(1).max(128)).max(32).default([]),
  })
  .strict();

/** A body that asks for a pipeline run. */
export const isPipelineSubmission = (body: unknown): boolean =>
  typeof body === "object" && body !== null && !Array.isArray(body) && (body as { as?: unknown }).as === "pipeline";

/** Compiles and submits; answers the run's id, and whether an idempotency key answered an earlier run. */
export const submitPipeline = async (
  pool: Pool,
  scope: Scope,
  raw: unknown,
  publicUrl: string | undefined,
): Promise<{ id: string; duplicate: boolean }> => {
  if (typeof raw === "object" && raw !== null && "credentials" in raw)
    throw new FlowError(
      "invalid_argument",
      "--credential is refused on a pipeline submit: a pipeline names its credentials in its credentials: maps",
      {
        details: { field: "credentials" },
      },
    );
  const body = PipelineSubmission.parse(raw);
  const compiled = assertPipeline(body.source);
  // The workflow group's name for this input, before anything is written (a group that does not evaluate is refused here).
  const group = runGroupOf(compiled, body.input ?? {});
  const { source, as: _as, ...rest } = body;
  return submitGraph(
    pool,
    scope,
    { ...rest, as: "graph", source: graphDocumentText(compiled.graph) },
    { yaml: source, compiled, group, publicUrl },
  );
};
