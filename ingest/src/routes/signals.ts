import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import { CANCEL_REASON_LIMIT, FlowError, LIFECYCLE_TEXT_LIMIT, keepTail } from "@flowsvc/core";
import { cancelRun, createRerun, deliverSignal, getRunView, withTransaction } from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { RouteDeps } from "../deps.js";
import { maskRunView } from "../run-masker.js";
import { api } from "../openapi/route-doc.js";

const SignalParams = z.object({
  org: z.string(),
  project: z.string(),
  id: z.string().min(1).max(64),
  name: z
    .string()
    .min(1)
    .max(512)
    .refine((n) => !n.startsWith("event:"), "signal names starting event: are reserved for event waits"),
});
const SignalBody = z.object({ payload: z.unknown().optional() }).strict().default({});
const RerunBody = z.object({ from: z.string().min(1).max(600) }).strict();
const RunIdParams = z.object({ id: z.string().min(1).max(64) });
/**
 * A reason up to CANCEL_REASON_LIMIT is taken and cut to its last LIFECYCLE_TEXT_LIMIT characters
 * (the spec's limit of a `run.*` event's reason), so the run's error and `run.cancelled` say the same.
 */
const CancelBody = z
  .object({
    reason: z
      .string()
      .max(
        CANCEL_REASON_LIMIT,
        `is longer than ${CANCEL_REASON_LIMIT} characters, the most a cancel reason may be; run.cancelled keeps its last ${LIFECYCLE_TEXT_LIMIT}`,
      )
      .optional(),
  })
  .strict()
  .default({});

/**
 * User-authenticated routes that act on a running script: signals (member; a job token cannot
 * call them, so a run cannot clear its own waits) and reruns.
 */
export const signalRoutes: FastifyPluginCallback<RouteDeps> = (app, deps, done) => {
  const { pool } = deps;
  const { maskers } = deps;
  /** A run as answered: masked with the project's current secrets. */
  const shown = async (projectId: string, id: string) => {
    const [view, { masker }] = await Promise.all([getRunView(pool, projectId, id), maskers.forProject(projectId)]);
    return view && maskRunView(masker, view);
  };
  const base = "/api/v1/orgs/:org/projects/:project/runs/:id";

  const signalDoc = api({
    summary: "Deliver a signal to a run",
    tag: "runs",
    auth: "member",
    params: SignalParams,
    body: SignalBody,
    response: { status: 202, description: "`{run_id, name, delivered}`" },
  });
  app.post(`${base}/signals/:name`, signalDoc, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const { id, name } = SignalParams.parse(req.params);
    const { payload } = SignalBody.parse(req.body ?? {});
    if (!(await getRunView(pool, scope.projectId, id)))
      throw new FlowError("not_found", `run ${id} not found in ${scope.org}/${scope.project}`);
    const res = await withTransaction(pool, (tx) =>
      deliverSignal(tx, id, { name, payload: payload ?? null, sentBy: scope.caller.userName }),
    );
    return reply.status(202).send({ run_id: id, name, delivered: res.delivered });
  });

  app.post(
    `${base}/cancel`,
    api({ summary: "Cancel a run", tag: "runs", auth: "member", params: RunIdParams, body: CancelBody }),
    async (req) => {
      const scope = await authorize(pool, req, "member");
      const { id } = RunIdParams.parse(req.params);
      const { reason } = CancelBody.parse(req.body ?? {});
      if (!(await getRunView(pool, scope.projectId, id)))
        throw new FlowError("not_found", `run ${id} not found in ${scope.org}/${scope.project}`);
      await withTransaction(pool, (tx) => cancelRun(tx, id, keepTail(reason ?? `cancelled by ${scope.caller.userName}`), deps.publicUrl));
      return shown(scope.projectId, id);
    },
  );

  const rerunDoc = api({
    summary: "A fresh run keeping the recorded calls before a site",
    tag: "runs",
    auth: "member",
    params: RunIdParams,
    body: RerunBody,
    response: { status: 201, description: "the new run" },
    errors: [409],
  });
  app.post(`${base}/rerun`, rerunDoc, async (req, reply) => {
    const scope = await authorize(pool, req, "member");
    const { id } = RunIdParams.parse(req.params);
    const { from } = RerunBody.parse(req.body);
    const newId = await withTransaction(pool, (tx) =>
      createRerun(tx, { projectId: scope.projectId, runId: id, site: from, createdBy: scope.caller.userId }),
    );
    return reply.status(201).send(await shown(scope.projectId, newId));
  });
  done();
};
