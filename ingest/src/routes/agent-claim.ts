import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from "fastify";
import {
  ClaimRequestSchema,
  buildEnvelope,
  secretNameProblem,
  secretValueProblem,
  type ActivityClaim,
  type ClaimResponse,
} from "@flowsvc/core";
import {
  appendLogs,
  findProjectById,
  getActivity,
  getEventForEnvelope,
  listJournal,
  markActivityRunning,
  markJobRunning,
  openJournal,
  openProjectSecrets,
  startRunIfNeeded,
  withTransaction,
  type LeasedJob,
  type ProjectRef,
  type RunInternal,
} from "@flowsvc/store";
import type { RouteDeps } from "../deps.js";
import { jobAndRunOfRequest, jobLost } from "../job-auth.js";

/** What a claim is about: the job behind the token, its run, and the agent that asks. */
interface Claim {
  job: LeasedJob;
  run: RunInternal;
  agentId: string;
}

/** A project's secret as the claim sees it: its value, or why it is left out. */
const secretProblem = (name: string, value: string | undefined): string | undefined =>
  secretNameProblem(name) ?? (value === undefined ? "its stored value does not open with this server's keys" : secretValueProblem(value));

/**
 * Secrets are resolved at claim, for the agent's memory only; the run never stores them. A
 * secret that breaks core's rules (stored before they existed) or does not open is left out,
 * and the run's log says which and why, never the value: one bad secret must not fail every
 * run of its project.
 */
const resolveSecrets = async (
  deps: RouteDeps,
  log: FastifyBaseLogger,
  run: RunInternal,
  orgId: string,
): Promise<Record<string, string>> => {
  const secrets: Record<string, string> = {};
  const skipped: string[] = [];
  for (const { name, value } of await openProjectSecrets(deps.pool, deps.keyring, run.project_id, orgId)) {
    const problem = secretProblem(name, value);
    if (value !== undefined && problem === undefined) {
      secrets[name] = value;
      continue;
    }
    log.warn({ runId: run.id, secretName: name, problem }, "secret not injected");
    skipped.push(`flowsvc: secret ${name} was not injected: ${problem}; set it again or remove it (flow secret rm ${name})\n`);
  }
  if (skipped.length > 0)
    await appendLogs(
      deps.pool,
      run.id,
      null,
      skipped.map((data) => ({ stream: "system" as const, data })),
    );
  return secrets;
};

/** The run's project and the secrets its job gets. */
const scopeOf = async (
  deps: RouteDeps,
  log: FastifyBaseLogger,
  run: RunInternal,
): Promise<{ project: ProjectRef; secrets: Record<string, string> }> => {
  const project = await findProjectById(deps.pool, run.project_id);
  if (!project) throw jobLost();
  // A run started by an untrusted event (a fork's pull request, an outsider's comment) gets no secrets.
  return { project, secrets: run.trusted ? await resolveSecrets(deps, log, run, project.orgId) : {} };
};

/** A handler run reads the whole envelope of its event from FLOW_INPUT_FILE. */
const envelopeOf = async (deps: RouteDeps, eventId: string | null): Promise<{ input?: unknown }> => {
  const e = eventId ? await getEventForEnvelope(deps.pool, eventId) : undefined;
  return e
    ? { input: buildEnvelope({ id: e.id, type: e.type, key: e.key, payload: e.payload, ...(e.fields ? { fields: e.fields } : {}) }) }
    : {};
};

/** What the agent runs with: the secrets under the run's env (the run's own env wins), and the values to mask. */
const environment = (run: RunInternal, secrets: Record<string, string>) => ({
  env: { ...secrets, ...run.env },
  masks: Object.values(secrets),
});

/**
 * A script job's claim: the run starts (and its job runs under this agent) while the run's
 * project, secrets, journal and trigger envelope are read, each on its own connection.
 */
const claimScript = async (
  deps: RouteDeps,
  req: FastifyRequest,
  { job, run, agentId }: Claim,
): Promise<ClaimResponse & { kind: "script" }> => {
  const { pool, keyring, leaseMs, publicUrl } = deps;
  const [{ project, secrets }, sealedJournal, envelope] = await Promise.all([
    scopeOf(deps, req.log, run),
    listJournal(pool, run.id),
    envelopeOf(deps, run.event_id),
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
    ...environment(run, secrets),
    journal,
    lease_ms: leaseMs,
    trigger: run.trigger,
    ...envelope,
  };
};

/** An activity job's claim: its command, with the run's env and secrets. */
const claimActivity = async (deps: RouteDeps, req: FastifyRequest, { job, run, agentId }: Claim): Promise<ActivityClaim> => {
  const { pool, leaseMs } = deps;
  const { project, secrets } = await scopeOf(deps, req.log, run);
  const activity = job.activity_id ? await getActivity(pool, job.activity_id) : undefined;
  if (!activity) throw jobLost();
  await markJobRunning(pool, job.id, agentId, leaseMs);
  await markActivityRunning(pool, activity.id);
  req.log.info({ runId: run.id, jobId: job.id, activity: activity.name, agentId }, "activity claimed");
  return {
    kind: "activity",
    job_id: job.id,
    run_id: run.id,
    activity_id: activity.id,
    name: activity.name,
    project: `${project.org}/${project.project}`,
    attempt: job.attempt,
    argv: activity.argv,
    ...environment(run, secrets),
    lease_ms: leaseMs,
  };
};

/** `POST /agent/v1/claim`: the first call of a dispatched job; it starts the job (and its run). */
export const claimRoute = (app: FastifyInstance, deps: RouteDeps): void => {
  app.post("/agent/v1/claim", async (req): Promise<(ClaimResponse & { kind: "script" }) | ActivityClaim> => {
    const { job, run } = await jobAndRunOfRequest(deps.pool, req);
    const { agent_id: agentId } = ClaimRequestSchema.parse(req.body);
    return job.kind === "run" ? claimScript(deps, req, { job, run, agentId }) : claimActivity(deps, req, { job, run, agentId });
  });
};
