import type { FastifyInstance, FastifyRequest } from "fastify";
import {
  AnnotateRequestSchema, ClaimRequestSchema, buildEnvelope, FinishRequestSchema, FlowError, LogRequestSchema, RecordRequestSchema,
  secretNameProblem, secretValueProblem,
  type ActivityClaim, type ClaimResponse,
} from "@flowsvc/core";
import {
  appendAnnotation, appendLogs, completeJob, completeRun, extendLease, findProjectById,
  getActivity, getEventForEnvelope, listJournal, markActivityRunning, openProjectSecrets, markJobRunning, openJournal, openJournalResult, recordJournal,
  retryIfAllowed, runLineage, sealStepResult, startRunIfNeeded, withTransaction, type LeasedJob, type RunInternal,
} from "@flowsvc/store";
import { jobAndRunOfRequest, jobLost, jobOfRequest, jobTokenDigestOf } from "../job-auth.js";
import type { RouteDeps } from "../deps.js";


const AGENT_BODY_LIMIT = 8 * 1024 * 1024;


/** The agent API: each call carries the token minted for one dispatch of one job. */
export const agentRoutes = (app: FastifyInstance, deps: RouteDeps): void => {
  const { pool, keyring, leaseMs, publicUrl } = deps;

  const jobOf = (req: FastifyRequest) => jobOfRequest(pool, req);
  const { maskers } = deps;

  /**
   * Secrets are resolved at claim, for the agent's memory only; the run never stores them. A
   * secret that breaks core's rules (stored before they existed) or does not open is left out,
   * and the run's log says which and why, never the value: one bad secret must not fail every
   * run of its project.
   */
  const resolveSecrets = async (projectId: string, orgId: string, runId: string): Promise<Record<string, string>> => {
    const secrets: Record<string, string> = {};
    const skipped: string[] = [];
    for (const { name, value } of await openProjectSecrets(pool, keyring, projectId, orgId)) {
      const problem = secretNameProblem(name) ?? (value === undefined ? "its stored value does not open with this server's keys" : secretValueProblem(value));
      if (value !== undefined && problem === undefined) {
        secrets[name] = value;
        continue;
      }
      app.log.warn({ runId, secretName: name, problem }, "secret not injected");
      skipped.push(`flowsvc: secret ${name} was not injected: ${problem}; set it again or remove it (flow secret rm ${name})\n`);
    }
    if (skipped.length > 0) await appendLogs(pool, runId, null, skipped.map((data) => ({ stream: "system" as const, data })));
    return secrets;
  };

  /** A handler run reads the whole envelope of its event from FLOW_INPUT_FILE. */
  const envelopeOf = async (eventId: string | null): Promise<{ input?: unknown }> => {
    const e = eventId ? await getEventForEnvelope(pool, eventId) : undefined;
    return e ? { input: buildEnvelope({ id: e.id, type: e.type, key: e.key, payload: e.payload, ...(e.fields ? { fields: e.fields } : {}) }) } : {};
  };

  /** The run's project and the secrets its job gets. */
  const scopeOf = async (run: RunInternal) => {
    const project = await findProjectById(pool, run.project_id);
    if (!project) throw jobLost();
    // A run started by an untrusted event (a fork's pull request, an outsider's comment) gets no secrets.
    return { project, secrets: run.trusted ? await resolveSecrets(run.project_id, project.orgId, run.id) : {} };
  };

  /**
   * A script job's claim: the run starts (and its job runs under this agent) while the run's
   * project, secrets, journal and trigger envelope are read, each on its own connection.
   */
  const claimScript = async (
    req: FastifyRequest,
    job: LeasedJob,
    agentId: string,
    run: RunInternal,
  ): Promise<ClaimResponse & { kind: "script" }> => {
    const [{ project, secrets }, sealedJournal, envelope] = await Promise.all([
      scopeOf(run),
      listJournal(pool, run.id),
      envelopeOf(run.event_id),
      withTransaction(pool, async (tx) => {
        await markJobRunning(tx, job.id, agentId, leaseMs);
        await startRunIfNeeded(tx, run.id, publicUrl);
      }),
    ]);
    // Step and activity output is sealed at rest; the agent replays it as recorded.
    const journal = await openJournal(pool, keyring, project, { runId: run.id, entries: sealedJournal });
    req.log.info({ runId: run.id, jobId: job.id, attempt: job.attempt, agentId, replaying: journal.length }, "job claimed");
    return {
      kind: "script",
      job_id: job.id,
      run_id: run.id,
      project: `${project.org}/${project.project}`,
      attempt: job.attempt,
      source: run.source,
      filename: run.filename,
      interpreter: run.interpreter,
      env: { ...secrets, ...run.env },
      masks: Object.values(secrets),
      journal,
      lease_ms: leaseMs,
      trigger: run.trigger,
      ...envelope,
    };
  };

  app.post("/agent/v1/claim", async (req): Promise<ClaimResponse & { kind: "script" } | ActivityClaim> => {
    const { job, run } = await jobAndRunOfRequest(pool, req);
    const body = ClaimRequestSchema.parse(req.body);
    if (job.kind === "run") return claimScript(req, job, body.agent_id, run);
    const { project, secrets } = await scopeOf(run);
    const activity = job.activity_id ? await getActivity(pool, job.activity_id) : undefined;
    if (!activity) throw jobLost();
    await markJobRunning(pool, job.id, body.agent_id, leaseMs);
    await markActivityRunning(pool, activity.id);
    req.log.info({ runId: run.id, jobId: job.id, activity: activity.name, agentId: body.agent_id }, "activity claimed");
    return {
      kind: "activity", job_id: job.id, run_id: run.id, activity_id: activity.id, name: activity.name,
      project: `${project.org}/${project.project}`, attempt: job.attempt, argv: activity.argv,
      env: { ...secrets, ...run.env }, masks: Object.values(secrets), lease_ms: leaseMs,
    };
  });

  app.post("/agent/v1/heartbeat", async (req) => {
    if (!(await extendLease(pool, jobTokenDigestOf(req), leaseMs))) throw jobLost();
    return { lease_ms: leaseMs };
  });

  app.post("/agent/v1/journal", { bodyLimit: AGENT_BODY_LIMIT }, async (req) => {
    const job = await jobOf(req);
    const entry = RecordRequestSchema.parse(req.body);
    // A step's output may hold a secret it printed: it is stored sealed, and answered as recorded.
    const scope = await maskers.forRun(job.run_id);
    const sealed = entry.kind === "step" ? { ...entry, result: await sealStepResult(keyring, scope, { runId: job.run_id, position: entry.position }, entry.result) } : entry;
    const out = await recordJournal(pool, job.run_id, sealed);
    if (out.type === "mismatch") {
      throw new FlowError("determinism", `position ${entry.position} already holds ${out.entry.kind} "${out.entry.name}"#${out.entry.ordinal}, not ${entry.kind} "${entry.name}"#${entry.ordinal}`);
    }
    if (out.type === "recorded") return { entry: { ...out.entry, result: entry.result ?? null } };
    return { entry: { ...out.entry, result: await openJournalResult(keyring, scope, await runLineage(pool, job.run_id), out.entry) } };
  });

  app.post("/agent/v1/log", { bodyLimit: AGENT_BODY_LIMIT }, async (req) => {
    const job = await jobOf(req);
    const { chunks } = LogRequestSchema.parse(req.body);
    await appendLogs(pool, job.run_id, job.id, chunks);
    return {};
  });

  app.post("/agent/v1/annotate", async (req) => {
    const job = await jobOf(req);
    const { markdown } = AnnotateRequestSchema.parse(req.body);
    const { masker } = await maskers.forRun(job.run_id);
    await appendAnnotation(pool, job.run_id, masker.text(markdown));
    return {};
  });

  app.post("/agent/v1/finish", async (req) => {
    const job = await jobOf(req);
    if (job.kind !== "run") {
      throw new FlowError("invalid_argument", "an activity job ends with POST /agent/v1/finish-activity, not /agent/v1/finish");
    }
    const body = FinishRequestSchema.parse(req.body);
    // Outputs and the error text are masked before they are stored, so the run.* events built from
    // them are too.
    const { masker } = await maskers.forRun(job.run_id);
    const outputs = masker.json(body.outputs) as Record<string, string>;
    const status = await withTransaction(pool, async (tx) => {
      await completeJob(tx, job.id, "done");
      if (body.exit_code === 0) {
        const output = { ...outputs, exit_code: 0, duration_ms: body.duration_ms };
        await completeRun(tx, job.run_id, { status: "succeeded", output }, publicUrl);
        return "succeeded";
      }
      const error = masker.text(body.error ?? `the script exited with code ${body.exit_code}`);
      if (await retryIfAllowed(tx, job.run_id, job.id, error)) return "retrying";
      await completeRun(tx, job.run_id, { status: "failed", error, output: { exit_code: body.exit_code, duration_ms: body.duration_ms } }, publicUrl);
      return "failed";
    });
    req.log.info({ runId: job.run_id, jobId: job.id, status, exitCode: body.exit_code }, "job finished");
    return { status };
  });
};
