import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from "fastify";
import {
  ClaimRequestSchema,
  FlowError,
  buildEnvelope,
  envMapProblems,
  layerJobEnv,
  resolveJobCredentials,
  secretNameProblem,
  secretValueProblem,
  type ActivityClaim,
  type ClaimResponse,
  type ResolvedHolding,
} from "@flowsvc/core";
import {
  appendLogs,
  getActivity,
  markActivityRunning,
  failJobAtClaim,
  markJobRunning,
  nodeJobSpec,
  openNamedCredential,
  openDeclaredCredentials,
  openJournal,
  openSealedSecrets,
  startJobAndRunTransaction,
  withTransaction,
  type ClaimReads,
  type ProjectRef,
} from "@flowsvc/store";
import type { RouteDeps } from "../deps.js";
import { claimOfRequest, jobLost, type Claim } from "../job-auth.js";

/** A project's secret as the claim sees it: its value, or why it is left out. */
const secretProblem = (name: string, value: string | undefined): string | undefined =>
  secretNameProblem(name) ?? (value === undefined ? "its stored value does not open with this server's keys" : secretValueProblem(value));

/** Lines for the run's log (stream `system`) about what its job was started without; nothing when there are none. */
const tellRun = async (deps: RouteDeps, runId: string, lines: readonly string[]): Promise<void> => {
  if (lines.length === 0) return;
  await appendLogs(
    deps.pool,
    runId,
    null,
    lines.map((data) => ({ stream: "system" as const, data })),
  );
};

/**
 * Secrets are resolved at claim, for the agent's memory only; the run never stores them. A
 * secret that breaks core's rules (stored before they existed) or does not open is left out,
 * and the run's log says which and why, never the value: one bad secret must not fail every
 * run of its project.
 */
const resolveSecrets = async (deps: RouteDeps, log: FastifyBaseLogger, claim: Claim): Promise<Record<string, string>> => {
  const { run, project, reads } = claim;
  const secrets: Record<string, string> = {};
  const skipped: string[] = [];
  // The claim's lookup read the sealed secrets with the job (none for an untrusted run).
  for (const { name, value } of await openSealedSecrets(deps.keyring, { projectId: run.project_id, orgId: project.orgId }, reads.secrets)) {
    const problem = secretProblem(name, value);
    if (value !== undefined && problem === undefined) {
      secrets[name] = value;
      continue;
    }
    log.warn({ runId: run.id, secretName: name, problem }, "secret not injected");
    skipped.push(`flowsvc: secret ${name} was not injected: ${problem}; set it again or remove it (flow secret rm ${name})\n`);
  }
  await tellRun(deps, run.id, skipped);
  return secrets;
};

/**
 * A run's (or a node's) env by core's one rule for a run's environment (envMapProblems), at claim:
 * every way in refuses a variable the rule refuses, but a row stored before the rule (and a rerun,
 * which copies its source's env) may hold one. It is left out, and the run's log says which and
 * why. An env the rule takes whole (every row written since) is passed on as it is.
 */
const ruledEnv = async (
  deps: RouteDeps,
  runId: string,
  env: Readonly<Record<string, string>>,
): Promise<Readonly<Record<string, string>>> => {
  const problems = envMapProblems(env);
  if (problems.length === 0) return env;
  await tellRun(
    deps,
    runId,
    problems.map((p) => `flowsvc: left out of the job's environment: ${p.message}\n`),
  );
  const refused = new Set(problems.map((p) => p.variable));
  // fromEntries defines each key: a variable named `__proto__` stays a plain entry.
  return Object.fromEntries(Object.entries(env).filter(([name]) => !refused.has(name)));
};

/** What a job runs with besides the run's own env: its project's secrets and its declared credentials. */
interface JobScope {
  project: ProjectRef;
  /** The run's env, by core's env rule (ruledEnv). */
  env: Readonly<Record<string, string>>;
  secrets: Record<string, string>;
  credentials: { env: Record<string, string>; masks: string[] };
}

/**
 * The credentials the run declares (`--credential ENV=name`), resolved by core's one resolver:
 * all of them, or the job fails here, before the agent starts anything (fail closed; an untrusted
 * run that declares one fails too).
 */
const resolveCredentials = async (deps: RouteDeps, claim: Claim, orgId: string): Promise<JobScope["credentials"]> => {
  const { job, run } = claim;
  const { declared, holdings } = await openDeclaredCredentials(deps.pool, deps.keyring, {
    runId: run.id,
    scope: { orgId, projectId: run.project_id },
    rows: claim.reads.declared,
  });
  const resolved = resolveJobCredentials({ declared, trusted: run.trusted, holdings });
  if (resolved.ok) return resolved;
  const error = `the job failed before it ran: its credentials do not resolve: ${resolved.problems.join("; ")}`;
  await withTransaction(deps.pool, (tx) => failJobAtClaim(tx, { job, error, publicUrl: deps.publicUrl }));
  throw new FlowError("job_lost", error);
};

/** The run's project, the secrets its job gets, and its credentials (or the job fails). */
const scopeOf = async (deps: RouteDeps, log: FastifyBaseLogger, claim: Claim): Promise<JobScope> => {
  const { run, project } = claim;
  const credentials = await resolveCredentials(deps, claim, project.orgId);
  // A run started by an untrusted event (a fork's pull request, an outsider's comment) gets no secrets.
  const env = await ruledEnv(deps, run.id, run.env);
  return { project, env, secrets: run.trusted ? await resolveSecrets(deps, log, claim) : {}, credentials };
};

/** A handler run reads the whole envelope of its event (read with the claim's job) from FLOW_INPUT_FILE. */
const envelopeOf = (e: ClaimReads["event"]): { input?: unknown } =>
  e ? { input: buildEnvelope({ id: e.id, type: e.type, key: e.key, payload: e.payload, ...(e.fields ? { fields: e.fields } : {}) }) } : {};

/**
 * What the agent runs with, by the spec's precedence (core's layerJobEnv: the secrets, the run's
 * env over them, its credentials over both), and the values to mask.
 */
const environment = ({ env, secrets, credentials }: JobScope) => ({
  env: layerJobEnv(secrets, env, credentials.env),
  masks: [...Object.values(secrets), ...credentials.masks],
});

/**
 * A script job's claim: the run's project, secrets, credentials, journal and trigger event (for
 * its envelope) came with the job (one statement); then the run starts and its job runs under
 * this agent.
 */
const claimScript = async (deps: RouteDeps, req: FastifyRequest, claim: Claim): Promise<ClaimResponse & { kind: "script" }> => {
  const { pool, keyring, leaseMs, publicUrl } = deps;
  const { job, run, agentId } = claim;
  const scope = await scopeOf(deps, req.log, claim);
  const envelope = envelopeOf(claim.reads.event);
  const sealedJournal = claim.reads.journal;
  // After the scope: a job whose credentials do not resolve has failed, and its run never started
  // (a claim whose lookup started the run had none to resolve).
  if (!claim.started) {
    const start = { jobId: job.id, digest: claim.digest, runId: run.id, agentId, leaseMs, publicUrl, projectId: run.project_id };
    if (!(await startJobAndRunTransaction(pool, start))) throw jobLost();
  }
  const { project } = scope;
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
    ...environment(scope),
    journal,
    lease_ms: leaseMs,
    trigger: run.trigger,
    ...envelope,
    request_id: req.id,
  };
};

/**
 * A graph's code or shell node job (kind 'node'): the node's script, its `credentials` map resolved
 * exactly like a script's `--credential` (all of them, or the job fails here and its node's retry
 * policy decides), the project's secrets under the node's `env`, no journal.
 */
const claimNode = async (deps: RouteDeps, req: FastifyRequest, claim: Claim): Promise<ClaimResponse & { kind: "script" }> => {
  const { job, run, project, agentId } = claim;
  const { pool, keyring, leaseMs } = deps;
  const spec = await nodeJobSpec(pool, job.id);
  if (!spec) throw jobLost();
  const scope = { orgId: project.orgId, projectId: run.project_id };
  const holdings = new Map<string, ResolvedHolding>();
  for (const name of new Set(Object.values(spec.credentials))) {
    const held = await openNamedCredential(pool, keyring, scope, name);
    if (held) holdings.set(name, held);
  }
  const resolved = resolveJobCredentials({ declared: spec.credentials, trusted: run.trusted, holdings });
  if (!resolved.ok) {
    const error = `node ${spec.node_id}: the job failed before it ran: its credentials do not resolve: ${resolved.problems.join("; ")}`;
    await withTransaction(pool, (tx) => failJobAtClaim(tx, { job, error, publicUrl: deps.publicUrl }));
    throw new FlowError("job_lost", error);
  }
  const secrets = run.trusted ? await resolveSecrets(deps, req.log, claim) : {};
  if (!(await markJobRunning(pool, { jobId: job.id, digest: claim.digest, agentId, leaseMs }))) throw jobLost();
  req.log.info({ runId: run.id, jobId: job.id, node: spec.node_id, agentId }, "graph node job claimed");
  return {
    kind: "script",
    job_id: job.id,
    run_id: run.id,
    project: `${project.org}/${project.project}`,
    attempt: job.attempt,
    source: spec.source,
    filename: spec.filename,
    interpreter: spec.interpreter,
    env: layerJobEnv(secrets, await ruledEnv(deps, run.id, spec.env), resolved.env),
    masks: [...Object.values(secrets), ...resolved.masks],
    journal: [],
    lease_ms: leaseMs,
    trigger: run.trigger,
  };
};

/** An activity job's claim: its command, with the run's env and secrets. */
const claimActivity = async (deps: RouteDeps, req: FastifyRequest, claim: Claim): Promise<ActivityClaim> => {
  const { pool, leaseMs } = deps;
  const { job, run, agentId } = claim;
  const scope = await scopeOf(deps, req.log, claim);
  const { project } = scope;
  const activity = job.activity_id ? await getActivity(pool, job.activity_id) : undefined;
  if (!activity) throw jobLost();
  if (!(await markJobRunning(pool, { jobId: job.id, digest: claim.digest, agentId, leaseMs }))) throw jobLost();
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
    ...environment(scope),
    lease_ms: leaseMs,
    request_id: req.id,
  };
};

/** `POST /agent/v1/claim`: the first call of a dispatched job; it starts the job (and its run). */
export const claimRoute = (app: FastifyInstance, deps: RouteDeps): void => {
  app.post("/agent/v1/claim", async (req): Promise<(ClaimResponse & { kind: "script" }) | ActivityClaim> => {
    const claim = await claimOfRequest(deps.pool, req, {
      agentIdOf: () => ClaimRequestSchema.parse(req.body).agent_id,
      leaseMs: deps.leaseMs,
      publicUrl: deps.publicUrl,
    });
    if (claim.job.kind === "node") return claimNode(deps, req, claim);
    return claim.job.kind === "run" ? claimScript(deps, req, claim) : claimActivity(deps, req, claim);
  });
};
