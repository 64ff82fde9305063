import type { FastifyInstance, FastifyPluginCallback, FastifyRequest } from "fastify";
import type { Pool } from "pg";
import {
  ActivityFinishRequestSchema,
  CallRequestSchema,
  FlowError,
  StateRequestSchema,
  type CallRequest,
  type CallResponse,
  type StateRequest,
} from "@flowsvc/core";
import {
  deleteState,
  finishActivityJob,
  getRunInternal,
  getState,
  listState,
  openJournal,
  performCall,
  sealActivityOutput,
  sealedIn,
  setState,
  stateScope,
  suspendJob,
  withTransaction,
  type LeasedJob,
  type RunInternal,
} from "@flowsvc/store";
import type { RouteDeps } from "../deps.js";
import { jobLost, jobOfRequest } from "../job-auth.js";
import type { RunMaskers } from "../run-masker.js";
import { AGENT_BODY_LIMIT } from "./agent.js";

/** The answer as the script sees it: an activity's stdout, sealed at rest, opened. */
const opened = async ({ pool, keyring, maskers }: RouteDeps, runId: string, res: CallResponse): Promise<CallResponse> => {
  if (!sealedIn(res.entry.result)) return res;
  const [entry] = await openJournal(pool, keyring, await maskers.forRun(runId), { runId, entries: [res.entry] });
  return { ...res, entry: entry! };
};

/** The job of a request that only a script job may make. */
const scriptJob = async (pool: Pool, req: FastifyRequest): Promise<LeasedJob> => {
  const job = await jobOfRequest(pool, req);
  if (job.kind !== "run")
    throw new FlowError(
      "invalid_argument",
      `${job.kind === "node" ? "a graph's code or shell node" : "an activity job"} cannot make durable calls`,
    );
  return job;
};

/** `POST /agent/v1/call`: records a durable call, or re-asks one that parked the run. */
const callRoute = (app: FastifyInstance, deps: RouteDeps): void => {
  app.post("/agent/v1/call", { bodyLimit: AGENT_BODY_LIMIT }, async (req): Promise<CallResponse> => {
    const job = await scriptJob(deps.pool, req);
    const call = await maskEmit(deps.maskers, job.run_id, CallRequestSchema.parse(req.body));
    try {
      return await opened(deps, job.run_id, await withTransaction(deps.pool, (tx) => performCall(tx, job.run_id, call)));
    } catch (err) {
      // Over HTTP a bus limit is a 429 to retry later; an agent retries 429s forever, so for the
      // script it is a final answer: its `flow emit` fails with the message.
      if (err instanceof FlowError && err.code === "limit_exceeded")
        throw new FlowError("emit_refused", err.message, { hint: err.hint, cause: err });
      throw err;
    }
  });
};

/** `POST /agent/v1/suspend`: the script ended on a pending call; the run parks (or its job is queued again). */
const suspendRoute = (app: FastifyInstance, { pool }: RouteDeps): void => {
  app.post("/agent/v1/suspend", async (req) => {
    const job = await scriptJob(pool, req);
    const status = await withTransaction(pool, (tx) => suspendJob(tx, job.id, job.run_id));
    req.log.info({ runId: job.run_id, jobId: job.id, status }, "job suspended");
    return { status };
  });
};

/** One `flow state` operation in the run's scope (or an entity's). */
const stateOp = async (pool: Pool, run: RunInternal, body: StateRequest) => {
  const scope = stateScope(run.id, body.entity);
  const at = { projectId: run.project_id, scope };
  switch (body.op) {
    case "get":
      return getState(pool, { ...at, key: body.key });
    case "set":
      await setState(pool, { ...at, key: body.key }, body.value);
      return {};
    case "delete":
      await deleteState(pool, { ...at, key: body.key });
      return {};
    case "list":
      return { items: await listState(pool, run.project_id, scope) };
  }
};

/** `POST /agent/v1/state`: reads and writes `flow state`. */
const stateRoute = (app: FastifyInstance, { pool }: RouteDeps): void => {
  app.post("/agent/v1/state", async (req) => {
    const job = await scriptJob(pool, req);
    const body = StateRequestSchema.parse(req.body);
    const run = await getRunInternal(pool, job.run_id);
    if (!run) throw jobLost();
    return stateOp(pool, run, body);
  });
};

/** `POST /agent/v1/finish-activity`: an activity child's end (store's finishActivityJob), which may wake its parent. */
const finishActivityRoute = (app: FastifyInstance, { pool, keyring, maskers }: RouteDeps): void => {
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
    const status = await withTransaction(pool, (tx) => finishActivityJob(tx, { job, activityId, outcome }));
    req.log.info({ runId: job.run_id, jobId: job.id, activityId, exitCode: body.exit_code }, "activity finished");
    return { status };
  });
};

/**
 * The agent API's durable calls (docs/internals.md): /call records or re-asks a call that may
 * park the run, /suspend parks it, /state reads and writes `flow state`, /finish-activity ends an
 * activity child and wakes its parent.
 */
export const agentCallRoutes: FastifyPluginCallback<RouteDeps> = (app, deps, done) => {
  for (const route of [callRoute, suspendRoute, stateRoute, finishActivityRoute]) route(app, deps);
  done();
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
