import { z } from "zod";
import type { FastifyInstance, FastifyPluginCallback, FastifyRequest } from "fastify";
import type { Pool } from "pg";
import {
  FlowError,
  RunSubmission,
  personSubmittedRun,
  SOURCE_LIMIT,
  type RunRequest,
  type ValueMasker,
  RUN_STATUSES,
  isGraphEngineWorkflow,
  isTerminalStatus,
} from "@flowsvc/core";
import {
  getGraphRunNodes,
  getRunView,
  listActivities,
  listJournal,
  listRunViews,
  mintId,
  openJournal,
  submitRunTransaction,
  type RunView,
} from "@flowsvc/store";
import { authorize, type Scope } from "../auth.js";
import type { RouteDeps } from "../deps.js";
import { streamRunLog } from "../log-stream.js";
import { maskGraphNodes, maskRunView } from "../run-masker.js";
import { api } from "../openapi/route-doc.js";
import { GRAPH_SUBMISSION_BODIES, isGraphSubmission, submitGraph } from "./graph-submit.js";
import { PipelineSubmission, isPipelineSubmission, submitPipeline } from "./pipeline-submit.js";

// The submission body's schema is core's (core/src/resources/run.ts), shared with the FlowRun CRD.
const SubmitSchema = RunSubmission;

const ListQuery = z.object({
  status: z.enum(RUN_STATUSES).optional(),
  tag: z.string().max(128).optional(),
  /** Only the runs this handler started. */
  handler: z.string().max(128).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(50),
});

const LogQuery = z.object({
  follow: z
    .enum(["0", "1", "true", "false"])
    .default("0")
    .transform((v) => v === "1" || v === "true"),
});

/** Most lines one window answers. */
export const LOG_LINES_MAX = 5000;
const LINE_MAX_MAX = 1024 * 1024;
const lineCount = z.coerce.number().int().min(1).max(LOG_LINES_MAX);
const LogLinesQuery = z
  .object({
    /** The 1-based number of the first line. */
    from: z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
    limit: lineCount.default(500),
    /** The last `tail` lines instead. */
    tail: lineCount.optional(),
    /** Lines longer than this keep their first `line_max` characters and say how many more they had. */
    line_max: z.coerce.number().int().min(16).max(LINE_MAX_MAX).optional(),
  })
  .refine((q) => q.from === undefined || q.tail === undefined, { message: "give from or tail, not both", path: ["tail"] });

const LogLinesAnswer = z.object({
  from: z.number().int().describe("the 1-based number of the first line of `lines`"),
  lines: z.array(z.string()).describe("the lines, without their line feeds"),
  total: z.number().int().describe("lines in the log so far, its unfinished last line included"),
  partial: z.boolean().describe("the last of `lines` is the log's last line, still without its line feed"),
  done: z.boolean().describe("the run has ended: `total` is final"),
  status: z.enum(RUN_STATUSES),
});

const RunParams = z.object({ org: z.string(), project: z.string(), id: z.string().min(1).max(64) });

const BASE = "/api/v1/orgs/:org/projects/:project/runs";

/** The run a submit inserts: a person's script, trusted (core's personSubmittedRun). */
const newRun = (scope: Scope, body: z.infer<typeof SubmitSchema>): RunRequest => ({
  id: mintId("run"),
  ...personSubmittedRun(body, {
    projectId: scope.projectId,
    sender: scope.caller.userName,
    createdBy: scope.caller.userId,
    idempotencyKey: body.idempotency_key ?? null,
  }),
});

/** `POST {scoped}/runs` (member): 201 with the new run, or 200 with the run an idempotency key already made. */
const submitRoute = (app: FastifyInstance, { pool, maskers, publicUrl }: RouteDeps): void => {
  const doc = api({
    summary: "Submit a run: a script, a graph document, or a stored graph by name",
    description:
      'One of four bodies: a script (`source`, `filename`, ...); a graph document (`as: "graph"`, `source` the flowsvc-graph/v1 JSON text, `filename`, `input`), checked and its credentials checked before anything is written; a stored graph (`graph` its name, `input`); or a pipeline (`as: "pipeline"`, `source` the flowsvc/pipeline/v1 YAML, `filename`, `input`), compiled to a graph first.',
    tag: "runs",
    auth: "member",
    body: z.union([SubmitSchema, ...GRAPH_SUBMISSION_BODIES, PipelineSubmission]),
    response: { status: 201, description: "the new run; 200 with `{id, duplicate: true}` when its idempotency key already made one" },
  });
  app.post(BASE, { bodyLimit: 2 * SOURCE_LIMIT, ...doc }, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    if (isGraphSubmission(req.body) || isPipelineSubmission(req.body)) {
      const graph = isPipelineSubmission(req.body)
        ? await submitPipeline(pool, scope, req.body, publicUrl)
        : await submitGraph(pool, scope, req.body);
      if (graph.duplicate) return reply.status(200).send({ id: graph.id, duplicate: true });
      return reply.status(201).send(await maskers.runView(scope.projectId, graph.id));
    }
    const body = SubmitSchema.parse(req.body);
    const run = newRun(scope, body);
    const res = await submitRunTransaction(pool, run, { sender: scope.caller.userName, credentials: body.credentials });
    if (res.duplicate) return reply.status(200).send({ id: res.id, duplicate: true });
    return reply.status(201).send(await maskers.runView(scope.projectId, res.id));
  });
};

const listRoute = (app: FastifyInstance, { pool, maskers }: RouteDeps): void => {
  app.get(BASE, api({ summary: "List recent runs", tag: "runs", auth: "viewer", query: ListQuery }), async (req) => {
    const scope = await authorize(pool, req, "viewer");
    const { masker } = await maskers.forProject(scope.projectId);
    return (await listRunViews(pool, scope.projectId, ListQuery.parse(req.query))).map((r) => maskRunView(masker, r));
  });
};

/** The run a `{scoped}/runs/:id/...` route names, for a viewer; another project's run is not found. */
const viewedRun = async (pool: Pool, req: FastifyRequest): Promise<{ scope: Scope; id: string; run: RunView }> => {
  const scope = await authorize(pool, req, "viewer");
  const { id } = RunParams.parse(req.params);
  const run = await getRunView(pool, scope.projectId, id);
  if (!run)
    throw new FlowError("not_found", `run ${id} not found in ${scope.org}/${scope.project}`, { hint: "list runs with `flow runs ls`" });
  return { scope, id, run };
};

const showRoute = (app: FastifyInstance, { pool, maskers }: RouteDeps): void => {
  app.get(`${BASE}/:id`, api({ summary: "Show a run and its activities", tag: "runs", auth: "viewer", params: RunParams }), async (req) => {
    const { scope, id, run } = await viewedRun(pool, req);
    const { masker } = await maskers.forProject(scope.projectId);
    const nodes = isGraphEngineWorkflow(run.workflow) ? { nodes: maskGraphNodes(masker, await getGraphRunNodes(pool, id)) } : {};
    return { ...maskRunView(masker, run), activities: await listActivities(pool, id), ...nodes };
  });
};

const stepsRoute = (app: FastifyInstance, { pool, keyring, maskers }: RouteDeps): void => {
  const doc = api({
    summary: "A run's journal of durable calls (sizes and exit codes, not output)",
    tag: "runs",
    auth: "viewer",
    params: RunParams,
  });
  app.get(`${BASE}/:id/steps`, doc, async (req) => {
    const { scope, id, run } = await viewedRun(pool, req);
    // A graph or pipeline run's steps are its nodes, their outputs masked.
    if (isGraphEngineWorkflow(run.workflow))
      return maskGraphNodes((await maskers.forProject(scope.projectId)).masker, await getGraphRunNodes(pool, id));
    // Step and activity output is sealed at rest: opened to be measured, and what is shown masked.
    const project = await maskers.forProject(scope.projectId);
    const journal = await openJournal(pool, keyring, project, { runId: id, entries: await listJournal(pool, id) });
    return journal.map((e) => describeEntry(e, project.masker));
  });
};

const logRoute = (app: FastifyInstance, deps: RouteDeps): void => {
  const doc = api({
    summary: "A run's masked log; `follow=1` streams it until the run ends",
    tag: "runs",
    auth: "viewer",
    params: RunParams,
    query: LogQuery,
    response: { contentType: "text/plain", schema: { type: "string" } },
  });
  app.get(`${BASE}/:id/log`, doc, async (req, reply) => {
    const { id } = await viewedRun(deps.pool, req);
    const { follow } = LogQuery.parse(req.query);
    reply
      .header("content-type", "text/plain; charset=utf-8")
      .header("cache-control", "no-store")
      .header("x-content-type-options", "nosniff");
    return reply.send(streamRunLog(deps, id, follow, req.raw));
  });
};

/** A window of the log by line number, for a reader that never holds it whole (the console's run page). */
const logLinesRoute = (app: FastifyInstance, deps: RouteDeps): void => {
  const doc = api({
    summary: "A window of a run's masked log, by line",
    description:
      "The text `GET runs/{id}/log` streams (masked, a pipeline run's lines prefixed by their job), split at line feeds: lines `from` (1-based) on, at most `limit` (default 500, at most 5000), or the last `tail` lines. A window past the end answers no lines. With `line_max` (16 to 1048576), a longer line keeps its first `line_max` characters followed by ` … [<n> more characters]`.",
    tag: "runs",
    auth: "viewer",
    params: RunParams,
    query: LogLinesQuery,
    response: { schema: LogLinesAnswer },
  });
  app.get(`${BASE}/:id/log/lines`, doc, async (req, reply) => {
    const q = LogLinesQuery.parse(req.query);
    const { id, run } = await viewedRun(deps.pool, req);
    // The status is read before the log: a run that had ended had written its last line.
    const index = await deps.logLines.of(id);
    const w =
      q.tail === undefined
        ? await index.window(deps.pool, q.from ?? 1, q.limit, q.line_max)
        : await index.tail(deps.pool, q.tail, q.line_max);
    void reply.header("cache-control", "no-store");
    return { ...w, done: isTerminalStatus(run.status), status: run.status };
  });
};

/** Runs: submit (member), list, show, steps and log (viewer). */
export const runRoutes: FastifyPluginCallback<RouteDeps> = (app, deps, done) => {
  for (const route of [submitRoute, listRoute, showRoute, stepsRoute, logRoute, logLinesRoute]) route(app, deps);
  done();
};

/**
 * A journal entry as `flow steps` shows it: the step's stdout size and exit code, not its bytes;
 * its name and error text masked with the project's current secrets.
 */
const describeEntry = (
  e: { position: number; kind: string; name: string; ordinal: number; status: string; result: unknown },
  masker: ValueMasker,
) => {
  const r = (e.result ?? {}) as { stdout_b64?: string; exit?: number; error?: string };
  return {
    position: e.position,
    kind: e.kind,
    name: masker.text(e.name),
    ordinal: e.ordinal,
    status: e.status,
    exit_code: typeof r.exit === "number" ? r.exit : null,
    output_bytes: typeof r.stdout_b64 === "string" ? Buffer.from(r.stdout_b64, "base64").length : null,
    ...(r.error ? { error: masker.text(r.error) } : {}),
  };
};
