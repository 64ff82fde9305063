import type { Pool, PoolClient } from "pg";
import { RUN_INTERNAL_COLUMNS, type RunInternal } from "./runs.js";
import type { ProjectRef } from "./tenancy.js";
import type { DeclaredRow } from "./credentials.js";
import type { JournalEntry } from "@flowsvc/core";
import { busLockKey } from "./emit.js";
import { lifecycleEmit, type LifecycleRunFields } from "./run-lifecycle.js";
import { mintId } from "./mint.js";

type Db = Pool | PoolClient;

export interface ClaimedJob {
  id: string;
  run_id: string;
  attempt: number;
  capabilities: string[];
  kind: "run" | "activity" | "node";
  activity_id: string | null;
}

/**
 * Claims up to `limit` ready jobs for dispatch (FOR UPDATE SKIP LOCKED, so several controllers
 * can share the queue). Each claimed job gets a fresh token digest and a dispatch lease; the
 * attempt counter is bumped so every token of an earlier dispatch is dead. Run it in a transaction:
 * the row locks of the SELECT must hold until the UPDATE.
 */
/** The distinct capability sets that ready jobs wait for (the dispatcher warns about those no pool serves). */
export const readyJobCapabilities = async (db: Db): Promise<string[][]> => {
  const { rows } = await db.query<{ capabilities: string[] }>(
    `select distinct capabilities from jobs where status = 'queued' and not_before <= now() and capabilities <> '{}'`,
  );
  return rows.map((r) => r.capabilities);
};

/**
 * Claims up to `limit` ready jobs whose capabilities `capabilities` covers, oldest first, each
 * with a fresh token digest: one statement in a transaction of its own (so it takes the pool, never
 * a caller's transaction, whose commit it would make asynchronous too), and jobs locked by a
 * concurrent claim are skipped, not waited for.
 */
export const claimReadyJobs = async (
  db: Pool,
  {
    limit,
    leaseMs,
    capabilities,
    mintDigest,
  }: { limit: number; leaseMs: number; capabilities: readonly string[]; mintDigest: () => Buffer },
): Promise<Array<ClaimedJob & { digest: Buffer } & Placement>> => {
  if (limit <= 0) return [];
  // One digest per job that may be claimed; those not used are never stored.
  const digests = Array.from({ length: limit }, () => mintDigest());
  // Each job comes back with its run's placement (as runPlacements; "" when the run is gone): the launch needs it.
  // The dispatch commits without waiting for its WAL flush (synchronous_commit off for this statement's
  // own transaction): it is a lease, not a fact. Lost in a Postgres crash, the job is queued again
  // and the agent's claim with this token answers job_lost; the claim's own commit is durable, and
  // flushing it flushes this one first (WAL order), so no job runs on a dispatch that was lost.
  const { rows } = await db.query<ClaimedJob & { digest: Buffer; hint: StartHint["run"] | null } & Placement>(
    `with async_commit as materialized (select set_config('synchronous_commit', 'off', true) as v),
     ready as (
       select id, run_id, row_number() over (order by not_before, created_at) as n
         from (select id, run_id, not_before, created_at from jobs
                where status = 'queued' and not_before <= now() and capabilities <@ $2::text[]
                order by not_before, created_at limit $1 for update skip locked) r
     )
     update jobs j set status = 'dispatched', attempt = j.attempt + 1, token_digest = d.digest,
            lease_expires_at = now() + ($4::int * interval '1 millisecond'), updated_at = now()
       from async_commit, ready join unnest($3::bytea[]) with ordinality as d(digest, n) on d.n = ready.n
            left join lateral (
              select o.name as org, p.name as project,
                     case when r.handler_name is not null and r.credentials = '{}'::jsonb
                          then jsonb_build_object('id', r.id, 'project_id', r.project_id, 'workflow', r.workflow, 'tags', r.tags,
                                                  'trigger', r.trigger, 'trusted', r.trusted) end as hint
                from runs r join projects p on p.id = r.project_id join orgs o on o.id = p.org_id
               where r.id = ready.run_id) pl on true
      where j.id = ready.id
      returning j.id, j.run_id, j.attempt, j.capabilities, j.kind, j.activity_id, j.token_digest as digest,
                coalesce(pl.org, '') as org, coalesce(pl.project, '') as project,
                case when j.kind = 'run' then pl.hint end as hint`,
    [limit, capabilities, digests, leaseMs],
  );
  // A handler run's job with no credentials to resolve: its claim may start it in its own statement (claimByToken).
  return rows.map(({ hint, ...job }) => {
    if (hint) noteStartHint(job.digest, { run: hint, org: job.org, project: job.project });
    return job;
  });
};

export interface LeasedJob {
  id: string;
  run_id: string;
  attempt: number;
  status: string;
  kind: "run" | "activity" | "node";
  activity_id: string | null;
}

/** A leased job with where its run belongs: the scope its journal values are sealed in. */
export interface LeasedJobInScope extends LeasedJob {
  project_id: string;
  org_id: string;
}

/**
 * The job a live token belongs to (dispatched or running), or undefined for a dead token, with
 * its run's project and org in the same round trip: a step's record seals with them, and asking
 * for them apart cost every `flow step` more queries than its insert.
 */
export const jobByToken = async (db: Db, digest: Buffer): Promise<LeasedJobInScope | undefined> => {
  const { rows } = await db.query<LeasedJobInScope>(
    `select j.id, j.run_id, j.attempt, j.status, j.kind, j.activity_id, r.project_id, p.org_id
       from jobs j join runs r on r.id = j.run_id join projects p on p.id = r.project_id
      where j.token_digest = $1 and j.status in ('dispatched', 'running')`,
    [digest],
  );
  return rows[0];
};

/**
 * The claim's reads besides the job: what the run declares (credentials.ts's DeclaredRow, sealed
 * values as hex), the project's sealed secrets (only for a trusted run: an untrusted one gets
 * none) and, for a script job, the run's journal. Asked apart, they were three more statements on
 * three more pool connections for every job.
 */
const CLAIM_READS = `(select coalesce(jsonb_agg(jsonb_build_object('variable', d.key, 'name', d.value, 'kind', c.kind,
               'sealed', encode(c.sealed, 'hex'), 'account_status', a.status, 'account_sealed', encode(a.sealed, 'hex'))), '[]')
          from jsonb_each_text(r.credentials) d
          left join credentials c on c.project_id = r.project_id and c.name = d.value
          left join accounts a on a.project_id = r.project_id and a.name = d.value) as declared,
       (select coalesce(jsonb_agg(jsonb_build_object('name', s.name, 'sealed', encode(s.sealed, 'hex')) order by s.name), '[]')
          from secrets s where s.project_id = r.project_id and r.trusted) as secrets,
       (select coalesce(jsonb_agg(jsonb_build_object('position', jr.position, 'kind', jr.kind, 'name', jr.name, 'ordinal', jr.ordinal,
               'status', jr.status, 'result', jr.result) order by jr.position), '[]')
          from journal jr where jr.run_id = j.run_id and j.kind = 'run') as journal,
       (select jsonb_build_object('id', e.id, 'type', e.type, 'key', e.key, 'payload', e.payload, 'fields', e.fields)
          from events e where e.id = r.event_id and j.kind = 'run') as event`;

/** The claim's read (jobAndRunByToken): the job behind the live token $1, its run, project and CLAIM_READS. */
const JOB_AND_RUN_READ = `select j.id, j.run_id, j.attempt, j.status, j.kind, j.activity_id,
       (select to_jsonb(x) from (select ${RUN_INTERNAL_COLUMNS.map((c) => `r.${c}`).join(", ")}) x) as run,
       o.id as project_org_id, o.name as project_org, p.name as project_name,
       ${CLAIM_READS}`;
const JOB_AND_RUN_FROM = `from jobs j left join runs r on r.id = j.run_id left join projects p on p.id = r.project_id left join orgs o on o.id = p.org_id
 where j.token_digest = $1 and j.status in ('dispatched', 'running')`;
const JOB_AND_RUN_BY_TOKEN = `${JOB_AND_RUN_READ} ${JOB_AND_RUN_FROM}`;

type HexRow<T, K extends keyof T> = Omit<T, K> & { [P in K]: string | null };

/** What the claim reads with its job (CLAIM_READS), sealed values as bytes again. */
export interface ClaimReads {
  /** What the run declares and what its project holds under those names (for openDeclaredCredentials). */
  declared: DeclaredRow[];
  /** The project's sealed secrets; none for an untrusted run. */
  secrets: Array<{ name: string; sealed: Buffer }>;
  /** The run's journal (a script job's; empty for the others), results as stored. */
  journal: JournalEntry[];
  /** A script job's trigger event (a handler run's), for its envelope; undefined for the others. */
  event: ClaimEvent | undefined;
}

/** The event a handler run was started by, as its envelope needs it. */
export interface ClaimEvent {
  id: string;
  type: string;
  key: string | null;
  payload: unknown;
  fields: Record<string, unknown> | null;
}

const bytes = (hex: string | null): Buffer | null => (hex === null ? null : Buffer.from(hex, "hex"));

/** What the claim's read answers: the job, its run and project (undefined when gone), and ClaimReads. */
export interface JobAndRun {
  job: LeasedJob;
  run: RunInternal | undefined;
  project: ProjectRef | undefined;
  reads: ClaimReads;
}

/** A row of JOB_AND_RUN_READ, sealed values as hex. */
type JobAndRunRow = LeasedJob & {
  run: RunInternal | null;
  project_org_id: string | null;
  project_org: string | null;
  project_name: string | null;
  declared: Array<HexRow<DeclaredRow, "sealed" | "account_sealed">> | null;
  secrets: Array<{ name: string; sealed: string }> | null;
  journal: JournalEntry[] | null;
  event: ClaimEvent | null;
};

const jobAndRunOf = (row: JobAndRunRow): JobAndRun => {
  const { run, project_org_id: orgId, project_org: org, project_name: project, declared, secrets, journal, event, ...job } = row;
  const found = run?.id ? run : undefined;
  return {
    job,
    run: found,
    project: found && orgId !== null && org !== null && project !== null ? { orgId, projectId: found.project_id, org, project } : undefined,
    reads: {
      declared: (declared ?? []).map((d) => ({ ...d, sealed: bytes(d.sealed), account_sealed: bytes(d.account_sealed) })),
      secrets: (secrets ?? []).map((s) => ({ name: s.name, sealed: Buffer.from(s.sealed, "hex") })),
      journal: journal ?? [],
      event: event ?? undefined,
    },
  };
};

/**
 * A claim's lookups in one round trip: the job behind a live token (as jobByToken), its run (as
 * getRunInternal; undefined if the run is gone), the run's project (as findProjectById) and the
 * claim's reads (ClaimReads).
 */
export const jobAndRunByToken = async (db: Db, digest: Buffer): Promise<JobAndRun | undefined> => {
  const { rows } = await db.query<JobAndRunRow>(JOB_AND_RUN_BY_TOKEN, [digest]);
  return rows[0] && jobAndRunOf(rows[0]);
};

/**
 * What the process that dispatched a handler run's job knew of the run when it wrote it: the
 * fields its `run.started` event is made of (run-lifecycle's lifecycleEmit), and its project's
 * names. A run's id, project, workflow, tags and trigger never change, and its trust cannot
 * change before it first starts, so the claim need not read them before it starts the run.
 */
export interface StartHint {
  run: Omit<LifecycleRunFields, "status">;
  org: string;
  project: string;
}

/** Start hints by the hex digest of the job's token (one dispatch of one job); the oldest go first. */
const startHints = new Map<string, StartHint>();
const START_HINTS_MAX = 4096;

/**
 * Notes what a claim with this token may start in one statement (claimByToken): a handler run that
 * declares no credentials, whose job this process wrote dispatched with that token's digest.
 */
export const noteStartHint = (digest: Buffer, hint: StartHint): void => {
  startHints.set(digest.toString("hex"), hint);
  if (startHints.size > START_HINTS_MAX) startHints.delete(startHints.keys().next().value!);
};

/**
 * The claim's read and the start in one statement, its commit included (autocommit): the job
 * behind the live token runs under the agent with a fresh lease (as markJobRunning), its run is
 * running (as markJobAndRunRunning, `started_at` this statement's time) and, the first time,
 * `run.started` is recorded (its payload made from the start hint; a handler run's platform event
 * is never delivered, so its row is all of its emit, written under the type's bus lock). Only for
 * a script job whose run declares no credentials (those resolve, or fail the job, before its run
 * starts). The read takes the statement's snapshot, the run as it was before the start, as the
 * read before the start transaction did. `started` names its run by primary key (`r.id = $4`, the
 * job's run_id already): joined to `job` alone, the generic plan made while runs is small (a new
 * server's connections keep it) scanned every run per claim (generic-plans.test.ts).
 */
const CLAIM_AND_START = `with job as (
     update jobs j set status = 'running', agent_id = $2, lease_expires_at = now() + ($3::int * interval '1 millisecond'), updated_at = now()
      where j.token_digest = $1 and j.status in ('dispatched', 'running') and j.kind = 'run' and j.run_id = $4
        and exists (select 1 from runs r where r.id = j.run_id and r.handler_name is not null and r.credentials = '{}'::jsonb)
      returning j.run_id),
   started as (
     update runs r set status = 'running', substate = null, deadline = null, wake_requested = false, started_at = coalesce(started_at, now())
       from job where r.id = $4 and r.id = job.run_id and r.status in ('queued', 'parked')
      returning r.id, (r.started_at = now()) as first),
   recorded as (
     insert into events (id, project_id, type, key, payload, source_run_id, generation, trusted)
     select $5, $6, 'run.started', $7, $8::jsonb, s.id, 0, $9
       from started s cross join lateral (select pg_advisory_xact_lock_shared($10::bigint)) bus
      where s.first)
 ${JOB_AND_RUN_READ}, exists (select 1 from job) as started
 ${JOB_AND_RUN_FROM}`;

/**
 * The claim's lookups (jobAndRunByToken) and, when this process dispatched the job with a start
 * hint, the start itself in the same round trip (CLAIM_AND_START): \`started\` says the job now runs
 * under \`agentId\` and its run is running, with nothing left for the claim's start transaction.
 */
export const claimByToken = async (
  db: Db,
  claim: { digest: Buffer; agentId: string; leaseMs: number; publicUrl: string | undefined },
): Promise<(JobAndRun & { started: boolean }) | undefined> => {
  const key = claim.digest.toString("hex");
  const hint = startHints.get(key);
  if (!hint) {
    const found = await jobAndRunByToken(db, claim.digest);
    return found && { ...found, started: false };
  }
  startHints.delete(key);
  const e = lifecycleEmit(
    { run: { ...hint.run, status: "running" }, org: hint.org, project: hint.project },
    { type: "run.started", extra: {}, publicUrl: claim.publicUrl },
  );
  const { rows } = await db.query<JobAndRunRow & { started: boolean }>(CLAIM_AND_START, [
    claim.digest,
    claim.agentId,
    claim.leaseMs,
    hint.run.id,
    mintId("evt"),
    e.projectId,
    e.key,
    JSON.stringify(e.payload),
    e.trusted,
    busLockKey(e.projectId, e.type),
  ]);
  const row = rows[0];
  if (!row) return undefined;
  const { started, ...rest } = row;
  return { ...jobAndRunOf(rest), started };
};

/** A claimed job. Its token must still be its live one: a claim read before the job was requeued (or dispatched again) must not take it back. */
export interface JobClaimant {
  readonly jobId: string;
  readonly digest: Buffer;
  readonly agentId: string;
  readonly leaseMs: number;
}

/**
 * The job runs under `agentId` with a fresh lease, if `digest` is still its live token; false when
 * the job was requeued, dispatched again or ended since the claim read it (the claim is job_lost).
 */
export const markJobRunning = async (db: Db, { jobId, digest, agentId, leaseMs }: JobClaimant): Promise<boolean> => {
  const { rowCount } = await db.query(
    `update jobs set status = 'running', agent_id = $2, lease_expires_at = now() + ($3::int * interval '1 millisecond'), updated_at = now()
      where id = $1 and token_digest = $4 and status in ('dispatched', 'running')`,
    [jobId, agentId, leaseMs, digest],
  );
  return (rowCount ?? 0) > 0;
};

export const extendLease = async (db: Db, digest: Buffer, leaseMs: number): Promise<boolean> => {
  const { rowCount } = await db.query(
    `update jobs set lease_expires_at = now() + ($2::int * interval '1 millisecond'), updated_at = now()
      where token_digest = $1 and status in ('dispatched', 'running')`,
    [digest, leaseMs],
  );
  return (rowCount ?? 0) > 0;
};

/**
 * Jobs whose agent stopped renewing its lease go back to the queue with their token revoked;
 * the next agent replays the run from the journal. Returns the run ids requeued.
 */
export const requeueExpiredJobs = async (db: Db): Promise<string[]> => {
  const { rows } = await db.query<{ run_id: string }>(
    `update jobs set status = 'queued', token_digest = null, lease_expires_at = null, agent_id = null, not_before = now(), updated_at = now()
      where status in ('dispatched', 'running') and lease_expires_at < now()
      returning run_id`,
  );
  if (rows.length > 0) await db.query(`select pg_notify('flowsvc_jobs', '')`);
  return rows.map((r) => r.run_id);
};

/** A launcher saw the agent of this dispatch die: requeue at once instead of waiting for the lease. */
export const requeueJobAttempt = async (db: Db, jobId: string, attempt: number): Promise<boolean> => {
  const { rowCount } = await db.query(
    `update jobs set status = 'queued', token_digest = null, lease_expires_at = null, agent_id = null, not_before = now(), updated_at = now()
      where id = $1 and attempt = $2 and status in ('dispatched', 'running')`,
    [jobId, attempt],
  );
  if ((rowCount ?? 0) > 0) await db.query(`select pg_notify('flowsvc_jobs', '')`);
  return (rowCount ?? 0) > 0;
};

/**
 * After a control-plane restart, agents that kept running while it was down must not lose their
 * jobs just because nobody could renew their lease: give every live lease a fresh grace period.
 */
export const graceLeasesAfterRestart = async (db: Db, leaseMs: number): Promise<number> => {
  const { rowCount } = await db.query(
    `update jobs set lease_expires_at = greatest(lease_expires_at, now() + ($1::int * interval '1 millisecond'))
      where status in ('dispatched', 'running')`,
    [leaseMs],
  );
  return rowCount ?? 0;
};

/** Where a run lives: its org's and project's names. */
export interface Placement {
  org: string;
  project: string;
}

/** Where each run lives (its org's and project's names), for launchers that place agents by project. */
export const runPlacements = async (db: Db, runIds: readonly string[]): Promise<Map<string, { org: string; project: string }>> => {
  const { rows } = await db.query<{ id: string; org: string; project: string }>(
    // Each run by primary key (a lateral subquery fenced by `offset 0`): as `r.id = any($1)` joined to
    // projects, the generic plan made while the tables are small hashed scans of every run and project.
    `select r.id, o.name as org, p.name as project
       from unnest($1::text[]) as i(id)
       cross join lateral (select r.id, r.project_id from runs r where r.id = i.id offset 0) r
       join projects p on p.id = r.project_id join orgs o on o.id = p.org_id`,
    [runIds],
  );
  return new Map(rows.map((r) => [r.id, { org: r.org, project: r.project }]));
};

/**
 * A launch that never started an agent (a Pod never scheduled, an image never pulled, a project at
 * its cap): the job goes back to the queue after `delayMs` without spending the attempt. Only while
 * no agent claimed it (status dispatched, this attempt); answers whether it went back.
 */
export const returnUnstartedJob = async (db: Db, jobId: string, attempt: number, delayMs: number): Promise<boolean> => {
  const { rowCount } = await db.query(
    `update jobs set status = 'queued', attempt = attempt - 1, token_digest = null, lease_expires_at = null, agent_id = null,
            not_before = now() + ($3::int * interval '1 millisecond'), updated_at = now()
      where id = $1 and attempt = $2 and status = 'dispatched'`,
    [jobId, attempt, Math.max(0, Math.round(delayMs))],
  );
  if ((rowCount ?? 0) > 0) await db.query(`select pg_notify('flowsvc_jobs', '')`);
  return (rowCount ?? 0) > 0;
};
