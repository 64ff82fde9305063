import type { FastifyInstance, FastifyRequest } from "fastify";
import { ActivityFinishRequestSchema, CallRequestSchema, FlowError, StateRequestSchema, type CallResponse } from "@flowsvc/core";
import {
  completeJob, deleteState, finishActivity, getRunInternal, getState, listState, performCall, setState, stateScope, suspendJob,
  withTransaction,
} from "@flowsvc/store";
import type { IngestDeps } from "../deps.js";
import { jobLost, jobOfRequest } from "../job-auth.js";

const AGENT_BODY_LIMIT = 8 * 1024 * 1024;

/**
 * The agent API's durable calls (docs/internals.md): /call records or re-asks a call that may
 * park the run, /suspend parks it, /state reads and writes `flow state`, /finish-activity ends an
 * activity child and wakes its parent.
 */
export const agentCallRoutes = (app: FastifyInstance, deps: IngestDeps): void => {
  const { pool } = deps;
  const scriptJob = async (req: FastifyRequest) => {
    const job = await jobOfRequest(pool, req);
    if (job.kind !== "run") throw new FlowError("invalid_argument", "an activity job cannot make durable calls");
    return job;
  };

  app.post("/agent/v1/call", { bodyLimit: AGENT_BODY_LIMIT }, async (req): Promise<CallResponse> => {
    const job = await scriptJob(req);
    const call = CallRequestSchema.parse(req.body);
    try {
      return await withTransaction(pool, (tx) => performCall(tx, job.run_id, call));
    } catch (err) {
      // Over HTTP a bus limit is a 429 to retry later; an agent retries 429s forever, so for the
      // script it is a final answer: its `flow emit` fails with the message.
      if (err instanceof FlowError && err.code === "limit_exceeded") throw new FlowError("emit_refused", err.message, { hint: err.hint, cause: err });
      throw err;
    }
  });

  app.post("/agent/v1/suspend", async (req) => {
    const job = await scriptJob(req);
    const status = await withTransaction(pool, (tx) => suspendJob(tx, job.id, job.run_id));
    req.log.info({ runId: job.run_id, jobId: job.id, status }, "job suspended");
    return { status };
  });

  app.post("/agent/v1/state", async (req) => {
    const job = await scriptJob(req);
    const body = StateRequestSchema.parse(req.body);
    const run = await getRunInternal(pool, job.run_id);
    if (!run) throw jobLost();
    const scope = stateScope(run.id, body.entity);
    switch (body.op) {
      case "get":
        return getState(pool, run.project_id, scope, body.key);
      case "set":
        await setState(pool, run.project_id, scope, body.key, body.value);
        return {};
      case "delete":
        await deleteState(pool, run.project_id, scope, body.key);
        return {};
      case "list":
        return { items: await listState(pool, run.project_id, scope) };
    }
  });

  app.post("/agent/v1/finish-activity", { bodyLimit: AGENT_BODY_LIMIT }, async (req) => {
    const job = await jobOfRequest(pool, req);
    if (job.kind !== "activity" || !job.activity_id) throw new FlowError("invalid_argument", "this job is not an activity");
    const body = ActivityFinishRequestSchema.parse(req.body);
    const activityId = job.activity_id;
    await withTransaction(pool, async (tx) => {
      await completeJob(tx, job.id, "done");
      await finishActivity(tx, activityId, body);
    });
    req.log.info({ runId: job.run_id, jobId: job.id, activityId, exitCode: body.exit_code }, "activity finished");
    return { status: body.exit_code === 0 ? "succeeded" : "failed" };
  });
};
