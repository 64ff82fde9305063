/**
 * A pipeline's submit through `POST {scoped}/runs` (issue 11: one engine): `{as: "pipeline",
 * source, filename, input?, idempotency_key?, tags?}`, what `flow submit p.yaml` sends. core's
 * pipeline compiler turns the YAML into a graph document (every refusal with the YAML line and
 * column); the graph is then submitted as any graph document is (graph-submit.ts: parseGraph, the
 * credential check, the run and its nodes), with the pipeline file's name. A `credentials` field
 * (`--credential`) is refused: a pipeline names its credentials in its own `credentials:` maps.
 * Concurrency groups and `cancel_on` need engine support that is not there yet: a pipeline using
 * them is refused rather than run without them.
 */
import { z } from "zod";
import { FlowError } from "@flowsvc/core";
import { PIPELINE_LIMITS, assertPipeline, toGraphValue, type CompiledPipeline } from "@flowsvc/core/pipeline";
import { evaluateConfig } from "@flowsvc/core/graph";
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

/** What the engine cannot honour yet: refused, never silently dropped. */
const unsupported = (p: CompiledPipeline): string | undefined => {
  const job = Object.entries(p.jobs).find(([, j]) => j.concurrency);
  return job ? `jobs.${job[0]}.concurrency: groups` : undefined;
};

/** A workflow concurrency group's name: its `${{ }}` holes evaluated over the run's input (core's one CEL wrapper). */
export const groupName = (group: string, input: unknown): string => {
  const r = evaluateConfig(toGraphValue(group, {}), { input, nodes: {} });
  if (!r.ok) throw new FlowError("invalid_argument", `concurrency.group: ${r.error}`, { details: { field: "concurrency.group" } });
  const name = typeof r.value === "string" ? r.value : JSON.stringify(r.value);
  if (name.length === 0 || name.length > 256 || name.includes("\u0000"))
    throw new FlowError(
      "invalid_argument",
      `concurrency.group: the group evaluates to ${JSON.stringify(name)}: give 1-256 characters without NUL`,
      {
        details: { field: "concurrency.group" },
      },
    );
  return name;
};

/** Compiles and submits; answers the run's id, and whether an idempotency key answered an earlier run. */
export const submitPipeline = async (pool: Pool, scope: Scope, raw: unknown): Promise<{ id: string; duplicate: boolean }> => {
  if (typeof raw === "object" && raw !== null && "credentials" in raw)
    throw new FlowError(
      "invalid_argument",
      "--credential is refused on a pipeline submit: a pipeline names its credentials in its credentials: maps",
      {
        details: { field: "credentials" },
      },
    );
  const body = PipelineSubmission.parse(raw);
  const pipeline = assertPipeline(body.source);
  const missing = unsupported(pipeline);
  if (missing !== undefined)
    throw new FlowError("invalid_argument", `${missing} are not available in this version; remove them to run this pipeline`, {
      hint: "flow check accepts them: the compiler knows them, the engine does not run them yet",
    });
  const { source: _source, as: _as, ...rest } = body;
  const group = pipeline.concurrency
    ? { name: groupName(pipeline.concurrency.group, body.input ?? {}), cancelRunning: pipeline.concurrency.policy === "cancel-running" }
    : undefined;
  return submitGraph(
    pool,
    scope,
    { ...rest, as: "graph", source: JSON.stringify(pipeline.graph) },
    { cancelOn: pipeline.cancel_on, ...(group ? { group } : {}) },
  );
};
