/**
 * A graph's submit through `POST {scoped}/runs` (graph contract, "The engine (B)"): either the
 * document itself (`{as: "graph", source, filename, input?}`, what `flow submit graph.json` sends)
 * or a stored graph by name (`{graph: "<name>", input?}`). The document is checked by core's
 * parseGraph (every problem with its path), then its credential requirements against what the
 * project holds (core's submitCheck: a missing or wrong-kind credential names the node, the
 * required and the stored kind); only then is the run created. Idempotency keys as for scripts.
 */
import { z } from "zod";
import {
  FlowError,
  GRAPH_LIMITS,
  PIPELINE_WORKFLOW,
  assertStorableJson,
  CONNECTOR_CHECKS,
  graphError,
  parseGraph,
  parseGraphText,
  submitCheck,
  trustOf,
  type GraphDocument,
} from "@flowsvc/core";
import type { CompiledPipeline, RunGroup } from "@flowsvc/core/pipeline";
import { getStoredGraph, mintId, graphRequirements, setupPipelineRun, submitGraphRun, withTransaction } from "@flowsvc/store";
import type { Pool } from "pg";
import type { Scope } from "../auth.js";

/** Largest `input`, in bytes of its JSON. */
export const GRAPH_INPUT_LIMIT = 256 * 1024;

const Common = {
  input: z.unknown().optional(),
  idempotency_key: z.string().min(1).max(255).optional(),
  tags: z.array(z.string().min(1).max(128)).max(32).default([]),
};

/** `{as: "graph", source, filename, input?}`: the document itself (`flow submit graph.json`). */
const DocumentSubmission = z
  .object({
    as: z.literal("graph"),
    source: z.string().max(GRAPH_LIMITS.textBytes, `source is over ${GRAPH_LIMITS.textBytes} bytes`),
    filename: z.string().min(1).max(255),
    ...Common,
  })
  .strict();
/** `{graph: "<stored name>", input?}`. */
const StoredSubmission = z
  .object({
    graph: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "a stored graph's name"),
    ...Common,
  })
  .strict();
type GraphSubmission = z.output<typeof DocumentSubmission> | z.output<typeof StoredSubmission>;
/** The graph bodies POST {scoped}/runs takes besides a script's, for its OpenAPI description (runs.ts). */
export const GRAPH_SUBMISSION_BODIES = [DocumentSubmission, StoredSubmission] as const;

/** The body by its shape (one schema each, so a refusal names the field, not a union). */
const parseSubmission = (raw: unknown): GraphSubmission =>
  typeof raw === "object" && raw !== null && "as" in raw ? DocumentSubmission.parse(raw) : StoredSubmission.parse(raw);

/** A body that asks for a graph run (the script schema answers every other body). */
export const isGraphSubmission = (body: unknown): boolean =>
  typeof body === "object" && body !== null && !Array.isArray(body) && ("graph" in body || (body as { as?: unknown }).as === "graph");

interface Checked {
  graph: GraphDocument;
  source: string;
  filename: string;
}

/** The document of the submission, checked; refused with every problem's path. */
const documentOf = async (pool: Pool, scope: Scope, body: GraphSubmission): Promise<Checked> => {
  if ("as" in body) {
    const parsed = parseGraphText(body.source, CONNECTOR_CHECKS);
    if (!parsed.ok) throw graphError(parsed.problems);
    return { graph: parsed.graph, source: body.source, filename: body.filename.split("/").at(-1) ?? body.filename };
  }
  const stored = await getStoredGraph(pool, scope.projectId, body.graph);
  if (!stored)
    throw new FlowError("not_found", `graph ${body.graph} not found in ${scope.org}/${scope.project}`, {
      hint: "list stored graphs with `flow graph ls`",
    });
  const parsed = parseGraph(JSON.parse(stored.source), CONNECTOR_CHECKS);
  if (!parsed.ok) throw graphError(parsed.problems);
  return { graph: parsed.graph, source: stored.source, filename: `graph:${stored.name}` };
};

/**
 * core's submit-time check against what the project holds (store's graphRequirements, the requirements
 * report's reader too): throws when a credential is missing or of the wrong kind, or a connected account needs reconnecting.
 */
const checkCredentials = async (pool: Pool, projectId: string, graph: GraphDocument): Promise<void> => {
  const refused = submitCheck(await graphRequirements(pool, projectId, graph));
  if (refused) throw refused;
};

/** A pipeline submitted as its compiled graph (pipeline-submit.ts): the run keeps its YAML as source and is a pipeline run. */
export interface SubmittedPipeline {
  yaml: string;
  compiled: CompiledPipeline;
  group: RunGroup | undefined;
  publicUrl: string | undefined;
}

/** Checks and creates the graph run (or pipeline run); answers its id, and whether an idempotency key answered an earlier run. */
export const submitGraph = async (
  pool: Pool,
  scope: Scope,
  raw: unknown,
  pipeline?: SubmittedPipeline,
): Promise<{ id: string; duplicate: boolean }> => {
  const body = parseSubmission(raw);
  const input = assertStorableJson(body.input ?? {}, "input");
  const inputBytes = Buffer.byteLength(JSON.stringify(input), "utf8");
  if (inputBytes > GRAPH_INPUT_LIMIT)
    throw new FlowError("invalid_argument", `input is ${inputBytes} bytes; the limit is ${GRAPH_INPUT_LIMIT}`, {
      details: { field: "input" },
    });
  const { graph, source, filename } = await documentOf(pool, scope, body);
  await checkCredentials(pool, scope.projectId, graph);
  const request = {
    id: mintId("run"),
    projectId: scope.projectId,
    ...(pipeline ? { workflow: PIPELINE_WORKFLOW, source: pipeline.yaml } : { source }),
    filename,
    env: {},
    tags: body.tags,
    trigger: { type: "manual", sender: scope.caller.userName },
    idempotencyKey: body.idempotency_key ?? null,
    createdBy: scope.caller.userId,
    retry: null,
    trusted: trustOf({ by: "person" }),
  };
  const nodes = graph.nodes.map((n) => ({ id: n.id, type: n.type, ...(n.retry ? { retry: n.retry } : {}) }));
  return withTransaction(pool, async (tx) => {
    const r = await submitGraphRun(tx, request, { sender: scope.caller.userName, nodes, input });
    // A pipeline's compiled graph, cancel_on, job groups and workflow group, in the run's own transaction.
    if (!r.duplicate && pipeline)
      await setupPipelineRun(tx, {
        runId: r.id,
        projectId: scope.projectId,
        pipeline: pipeline.compiled,
        group: pipeline.group,
        publicUrl: pipeline.publicUrl,
      });
    return r;
  });
};
