import type { IncomingHttpHeaders } from "node:http";
import type { FastifyBaseLogger, FastifyInstance, FastifyPluginCallback, FastifyRequest } from "fastify";
import {
  AnnotateRequestSchema,
  createValueMasker,
  determinismError,
  FinishRequestSchema,
  FlowError,
  LogRequestSchema,
  RecordRequestSchema,
  type FinishRequest,
  type JournalEntry,
  type RecordRequest,
} from "@flowsvc/core";
import {
  appendAnnotation,
  appendLogs,
  extendLease,
  finishNodeJob,
  finishScriptJobTransaction,
  openJournalResult,
  recordJournal,
  recordJournalForToken,
  runLineage,
  sealStepResult,
  withTransaction,
  type LeasedJobInScope,
  type ServiceMetrics,
} from "@flowsvc/store";
import { jobLost, jobOfRequest, jobTokenDigestOf, lastSeenJobOfRequest } from "../job-auth.js";
import type { RouteDeps } from "../deps.js";
import { claimRoute } from "./agent-claim.js";
import { serveFront, storableJsonParser, type JsonBodyParser } from "../front-io.js";
import { AGENT_BODY_LIMIT, JOURNAL_ROUTE, type ServeJournal } from "../journal-front.js";

/** Journal entries, log batches and activity output may be large; the rest of the agent API keeps the default 1 MiB. */
export { AGENT_BODY_LIMIT };

/** `POST /agent/v1/heartbeat`: the job keeps its lease; a lost job is told so (409). */
const heartbeatRoute = (app: FastifyInstance, { pool, leaseMs }: RouteDeps): void => {
  app.post("/agent/v1/heartbeat", async (req) => {
    if (!(await extendLease(pool, jobTokenDigestOf(req), leaseMs))) throw jobLost();
    return { lease_ms: leaseMs };
  });
};

/** What a journal record reads from its request: the token (in its headers) and the parsed body. */
interface JournalAsk {
  readonly headers: IncomingHttpHeaders;
  readonly body: unknown;
}

/**
 * A journal record: a step's result is recorded at its position, or, replayed, answered as
 * recorded; a different call at a recorded position is the determinism refusal.
 */
const journalRecorder = ({ pool, keyring }: RouteDeps) => {
  /** A step's output may hold a secret it printed: it is stored sealed (the run's org and project are the seal's scope). */
  const sealedEntry = async (job: LeasedJobInScope, entry: RecordRequest): Promise<RecordRequest> =>
    entry.kind === "step"
      ? {
          ...entry,
          result: await sealStepResult(
            keyring,
            { orgId: job.org_id, projectId: job.project_id },
            { runId: job.run_id, position: entry.position },
            entry.result,
          ),
        }
      : entry;

  return async (req: JournalAsk): Promise<{ entry: JournalEntry }> => {
    // A job already seen records its step in one statement that also checks the job is live
    // (one round trip per `flow step`); anything else (a first record, a lost job, a retried or
    // mismatching record) takes the long way below.
    // A body that does not parse takes the long way too, so a lost job is told so (409) before its body is judged.
    const seen = lastSeenJobOfRequest(req);
    const quick = seen && seen.kind !== "node" ? RecordRequestSchema.safeParse(req.body) : undefined;
    if (seen && quick?.success) {
      const entry = quick.data;
      const recorded = await recordJournalForToken(pool, { digest: seen.digest, runId: seen.run_id }, await sealedEntry(seen, entry));
      if (recorded) return { entry: { ...recorded, result: entry.result ?? null } };
    }
    const job = await jobOfRequest(pool, req);
    if (job.kind === "node") throw new FlowError("invalid_argument", "a graph's code or shell node cannot make durable calls");
    const entry = RecordRequestSchema.parse(req.body);
    const scope = { orgId: job.org_id, projectId: job.project_id };
    const out = await recordJournal(pool, job.run_id, await sealedEntry(job, entry));
    if (out.type === "mismatch") throw determinismError(out.entry, entry);
    if (out.type === "recorded") return { entry: { ...out.entry, result: entry.result ?? null } };
    return { entry: { ...out.entry, result: await openJournalResult(keyring, scope, await runLineage(pool, job.run_id), out.entry) } };
  };
};

type RecordJournal = ReturnType<typeof journalRecorder>;

/**
 * The journal route served from a plain socket request (journal-front.ts): what Fastify's chain
 * does for it, with the same code (front-io.ts serveFront): the body and its parser, the record,
 * the answer, the HTTP and step metrics.
 */
const serveJournal =
  (
    record: RecordJournal,
    { metrics, logger, parse }: { metrics: ServiceMetrics; logger: FastifyBaseLogger; parse: JsonBodyParser },
  ): ServeJournal =>
  (req, res) =>
    serveFront(req, res, {
      metrics,
      route: (id) => ({
        route: JOURNAL_ROUTE,
        log: () => logger.child({ requestId: id }),
        parse: (raw: Buffer): unknown => parse(raw.toString("utf8")),
        handle: (body: unknown) => record({ headers: req.headers, body }),
        ok: (out) => ({ status: 200, payload: out }),
      }),
    });

/** `POST /agent/v1/journal`: Fastify's way in; a plain record from a socket is served by the same code in front of it (journal-front.ts). */
const journalRoute = (app: FastifyInstance, deps: RouteDeps): void => {
  const record = journalRecorder(deps);
  deps.journalFront?.install(serveJournal(record, { metrics: deps.metrics, logger: app.log, parse: storableJsonParser(app) }));
  app.post(JOURNAL_ROUTE, { bodyLimit: AGENT_BODY_LIMIT }, (req) => record(req));
};

/** `POST /agent/v1/log`: a batch of the script's output, masked by the agent, appended to the run's log. */
const logRoute = (app: FastifyInstance, { pool }: RouteDeps): void => {
  app.post("/agent/v1/log", { bodyLimit: AGENT_BODY_LIMIT }, async (req) => {
    const job = await jobOfRequest(pool, req);
    const { chunks } = LogRequestSchema.parse(req.body);
    await appendLogs(pool, job.run_id, job.id, chunks);
    return {};
  });
};

/** `POST /agent/v1/annotate`: markdown shown with the run, masked with the run's secrets. */
const annotateRoute = (app: FastifyInstance, { pool, maskers }: RouteDeps): void => {
  app.post("/agent/v1/annotate", async (req) => {
    const job = await jobOfRequest(pool, req);
    const { markdown } = AnnotateRequestSchema.parse(req.body);
    const { masker } = await maskers.forRun(job.run_id);
    await appendAnnotation(pool, job.run_id, masker.text(markdown));
    return {};
  });
};

const NOTHING_TO_MASK = createValueMasker([]);

/**
 * The finishing job, and its body when it takes the quick path: a script job seen live at its claim
 * is not looked up again; the finish's own statements check that its token still holds it (store's
 * finishScriptJob with tokenDigest), and a job lost meanwhile is job_lost with nothing written (its
 * transaction rolls back). A body that does not parse takes the long way, so a lost job is told so
 * (409) before its body is judged.
 */
const finishingJob = async (
  pool: RouteDeps["pool"],
  req: FastifyRequest,
): Promise<{ job: LeasedJobInScope & { digest: Buffer }; quick?: FinishRequest }> => {
  const seen = lastSeenJobOfRequest(req);
  const quick = seen?.kind === "run" ? FinishRequestSchema.safeParse(req.body) : undefined;
  if (seen && quick?.success) return { job: seen, quick: quick.data };
  return { job: await jobOfRequest(pool, req) };
};

/** Exit 0 and no outputs: the finish stores no text the script wrote (an error is read only on failure). */
const succeededBare = (body: FinishRequest): boolean => body.exit_code === 0 && Object.keys(body.outputs).length === 0;

/** `POST /agent/v1/finish`: a script job's end; the run succeeds, retries or fails (store's finishScriptJob). */
const finishRoute = (app: FastifyInstance, { pool, maskers, publicUrl }: RouteDeps): void => {
  // The body may carry the job's last log batch (as large as one /log request).
  app.post("/agent/v1/finish", { bodyLimit: AGENT_BODY_LIMIT }, async (req) => {
    const { job, quick } = await finishingJob(pool, req);
    if (job.kind === "node") {
      const body = FinishRequestSchema.parse(req.body);
      const { masker } = await maskers.forRun(job.run_id);
      const node = { jobId: job.id, exitCode: body.exit_code, outputs: body.outputs, error: body.error, masker };
      const status = await withTransaction(pool, async (tx) => {
        // First: the node's output takes the last lines of its stdout from run_logs.
        await appendLogs(tx, job.run_id, job.id, body.log ?? []);
        return finishNodeJob(tx, node);
      });
      req.log.info({ runId: job.run_id, jobId: job.id, status, exitCode: body.exit_code }, "graph node job finished");
      return { status: status === "success" ? "succeeded" : (status ?? "failed") };
    }
    if (job.kind !== "run") {
      throw new FlowError("invalid_argument", "an activity job ends with POST /agent/v1/finish-activity, not /agent/v1/finish");
    }
    const body = quick ?? FinishRequestSchema.parse(req.body);
    // The run's masker: outputs and the error text are stored masked, so the run.* events are too.
    // A success with no outputs stores neither: no look-up (two queries) for a masker with nothing to mask.
    const { masker } = succeededBare(body) ? { masker: NOTHING_TO_MASK } : await maskers.forRun(job.run_id);
    const finish = {
      job,
      tokenDigest: job.digest,
      exitCode: body.exit_code,
      outputs: body.outputs,
      error: body.error,
      durationMs: body.duration_ms,
      masker,
      publicUrl,
    };
    const status = await finishScriptJobTransaction(pool, { ...finish, projectId: job.project_id, log: body.log ?? [] }).catch(
      (err: unknown) => {
        // The quick path's lost job answers as the token lookup would have.
        throw err instanceof FlowError && err.code === "job_lost" && quick ? jobLost() : err;
      },
    );
    req.log.info({ runId: job.run_id, jobId: job.id, status, exitCode: body.exit_code }, "job finished");
    return { status };
  });
};

/** The agent API's lifecycle of a job: each call carries the token minted for one dispatch of one job. */
export const agentRoutes: FastifyPluginCallback<RouteDeps> = (app, deps, done) => {
  for (const route of [claimRoute, heartbeatRoute, journalRoute, logRoute, annotateRoute, finishRoute]) route(app, deps);
  done();
};
