import { z } from "zod";
import type { FastifyInstance } from "fastify";
import { FlowError, SCRIPT_WORKFLOW, pickInterpreter, trustOf, type ValueMasker } from "@flowsvc/core";
import { emitEvent, getRunView, insertRunWithJob, listActivities, listJournal, listRunViews, mintId, openJournal, withTransaction } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { RouteDeps } from "../deps.js";
import { streamRunLog } from "../log-stream.js";
import { maskRunView } from "../run-masker.js";

export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SOURCE_LIMIT = 1024 * 1024;

const SubmitSchema = z.object({
  kind: z.literal("script", { error: "only kind \"script\" is available in this version (pipelines and graphs come later)" }),
  source: z.string().max(SOURCE_LIMIT, `source is over ${SOURCE_LIMIT} bytes`),
  filename: z.string().min(1).max(255).regex(/^[^/\\\0]+$/, "filename must be a base name, without slashes"),
  interpreter: z.array(z.string().min(1)).min(1).max(16).optional(),
  env: z.record(z.string().regex(ENV_NAME, "env names are letters, digits and _, not starting with a digit").max(256), z.string().max(128 * 1024)).default({}),
  idempotency_key: z.string().min(1).max(255).optional(),
  tags: z.array(z.string().min(1).max(128)).max(32).default([]),
  retry: z
    .object({ attempts: z.number().int().min(1).max(100), backoff_ms: z.number().int().min(0).max(24 * 3600 * 1000).default(0) })
    .strict()
    .optional(),
}).strict();

const ListQuery = z.object({
  status: z.enum(["queued", "running", "parked", "succeeded", "failed", "cancelled"]).optional(),
  tag: z.string().max(128).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(50),
});

const LogQuery = z.object({ follow: z.enum(["0", "1", "true", "false"]).default("0").transform((v) => v === "1" || v === "true") });

const RunParams = z.object({ org: z.string(), project: z.string(), id: z.string().min(1).max(64) });

export const runRoutes = (app: FastifyInstance, deps: RouteDeps): void => {
  const { pool, keyring } = deps;
  const { maskers } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/runs";

  app.post(base, { bodyLimit: 2 * SOURCE_LIMIT }, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const body = SubmitSchema.parse(req.body);
    const interpreter = body.interpreter ?? pickInterpreter(body.filename);
    const run = {
      id: mintId("run"),
      projectId: scope.projectId,
      workflow: SCRIPT_WORKFLOW,
      source: body.source,
      filename: body.filename,
      interpreter,
      env: body.env,
      tags: body.tags,
      trigger: { type: "manual", sender: scope.caller.userName },
      idempotencyKey: body.idempotency_key ?? null,
      createdBy: scope.caller.userId,
      retry: body.retry ?? null,
      // A person's submit: the one way work becomes trusted again (core/src/trust.ts).
      trusted: trustOf({ by: "person" }),
    };
    const res = await withTransaction(pool, async (tx) => {
      const r = await insertRunWithJob(tx, run, mintId("job"), []);
      // Every trigger is recorded on the bus: a submit is a `manual` event.
      if (!r.duplicate) await emitEvent(tx, { projectId: scope.projectId, type: "manual", key: null, payload: { run_id: r.id, sender: scope.caller.userName }, sourceRunId: null, trusted: run.trusted, platform: true });
      return r;
    });
    if (res.duplicate) return reply.status(200).send({ id: res.id, duplicate: true });
    const { masker } = await maskers.forProject(scope.projectId);
    const view = await getRunView(pool, scope.projectId, res.id);
    return reply.status(201).send(view && maskRunView(masker, view));
  });

  app.get(base, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    const { masker } = await maskers.forProject(scope.projectId);
    return (await listRunViews(pool, scope.projectId, ListQuery.parse(req.query))).map((r) => maskRunView(masker, r));
  });

  app.get(`${base}/:id`, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    const { id } = RunParams.parse(req.params);
    const run = await getRunView(pool, scope.projectId, id);
    if (!run) throw new FlowError("not_found", `run ${id} not found in ${scope.org}/${scope.project}`, { hint: "list runs with `flow runs ls`" });
    const { masker } = await maskers.forProject(scope.projectId);
    return { ...maskRunView(masker, run), activities: await listActivities(pool, id) };
  });

  app.get(`${base}/:id/steps`, async (req) => {
    const scope = await authorize(pool, req, "viewer");
    const { id } = RunParams.parse(req.params);
    if (!(await getRunView(pool, scope.projectId, id))) throw new FlowError("not_found", `run ${id} not found in ${scope.org}/${scope.project}`);
    // Step and activity output is sealed at rest: opened to be measured, and what is shown masked.
    const project = await maskers.forProject(scope.projectId);
    const journal = await openJournal(pool, keyring, project, { runId: id, entries: await listJournal(pool, id) });
    return journal.map((e) => describeEntry(e, project.masker));
  });

  app.get(`${base}/:id/log`, async (req, reply) => {
    const scope = await authorize(pool, req, "viewer");
    const { id } = RunParams.parse(req.params);
    const { follow } = LogQuery.parse(req.query);
    if (!(await getRunView(pool, scope.projectId, id))) throw new FlowError("not_found", `run ${id} not found in ${scope.org}/${scope.project}`);
    reply.header("content-type", "text/plain; charset=utf-8").header("cache-control", "no-store").header("x-content-type-options", "nosniff");
    return reply.send(streamRunLog(deps, id, follow, req.raw));
  });
};

/**
 * A journal entry as `flow steps` shows it: the step's stdout size and exit code, not its bytes;
 * its name and error text masked with the project's current secrets.
 */
const describeEntry = (e: { position: number; kind: string; name: string; ordinal: number; status: string; result: unknown }, masker: ValueMasker) => {
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
