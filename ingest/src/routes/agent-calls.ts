import type { FastifyInstance, FastifyRequest } from "fastify";
import { ActivityFinishRequestSchema, CallRequestSchema, FlowError, StateRequestSchema, type CallRequest, type CallResponse } from "@flowsvc/core";
import {
  completeJob, deleteState, finishActivity, getRunInternal, getState, listState, openJournal, performCall, sealActivityOutput, sealedIn, setState,
  stateScope, suspendJob, withTransaction,
} from "@flowsvc/store";
import type { RouteDeps } from "../deps.js";
import { jobLost, jobOfRequest } from "../job-auth.js";
import type { RunMaskers } from "../run-masker.js";

const AGENT_BODY_LIMIT = 8 * 1024 * 1024;

/**
 * The agent API's durable calls (docs/internals.md): /call records or re-asks a call that may
 * park the run, /suspend parks it, /state reads and writes `flow state`, /finish-activity ends an
 * activity child and wakes its parent.
 */
export const agentCallRoutes = (app: FastifyInstance, deps: RouteDeps): void => {
  const { pool, keyring } = deps;
  const { maskers } = deps;

  /** The answer as the script sees it: an activity's stdout, sealed at rest, opened. */
  const opened = async (runId: string, res: CallResponse): Promise<CallResponse> => {
    if (!sealedIn(res.entry.result)) return res;
    const [entry] = await openJournal(pool, keyring, await maskers.forRun(runId), { runId, entries: [res.entry] });
    return { ...res, entry: entry! };
  };

  const scriptJob = async (req: FastifyRequest) => {
    const job = await jobOfRequest(pool, req);
    if (job.kind !== "run") throw new FlowError("invalid_argument", "an activity job cannot make durable calls");
    return job;
  };

  app.post("/agent/v1/call", { bodyLimit: AGENT_BODY_LIMIT }, async (req): Promise<CallResponse> => {
    const job = await scriptJob(req);
    const call = await maskEmit(maskers, job.run_id, CallRequestSchema.parse(req.body));
    try {
      return await opened(job.run_id, await withTransaction(pool, (tx) => performCall(tx, job.run_id, call)));
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
    // The child's stdout replays as recorded, so it is sealed, not masked; its error text is masked.
    const scope = await maskers.forRun(job.run_id);
    const outcome = {
      exit_code: body.exit_code,
      stdout_b64: await sealActivityOutput(keyring, scope, activityId, body.stdout_b64),
      ...(body.error === undefined ? {} : { error: scope.masker.text(body.error) }),
    };
    await withTransaction(pool, async (tx) => {
      await completeJob(tx, job.id, "done");
      await finishActivity(tx, activityId, outcome);
    });
    req.log.info({ runId: job.run_id, jobId: job.id, activityId, exitCode: body.exit_code }, "activity finished");
    return { status: body.exit_code === 0 ? "succeeded" : "failed" };
  });
};

/**
 * An in-script emit's payload and key are masked with the run's masker before the event is
 * stored: the bus, `flow events ls`, the handler runs it feeds and their envelopes never see the
 * value. Replays send the same call; the entry recorded at the first one answers them.
 */
const maskEmit = async (maskers: RunMaskers, runId: string, call: CallRequest): Promise<CallRequest> => {
  if (call.kind !== "emit") return call;
  const { masker } = await maskers.forRun(runId);
  if (!masker.active) return call;
  const args = call.args;
  return {
    ...call,
    args: {
      ...args,
      ...("payload" in args ? { payload: masker.json(args["payload"]) } : {}),
      ...(typeof args["key"] === "string" ? { key: masker.text(args["key"]) } : {}),
    },
  };
};
