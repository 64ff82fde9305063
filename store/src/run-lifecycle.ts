/**
 * A run's lifecycle, in one place: `createRuns` is the one insert of runs (with their first
 * jobs, defaults from core's `newRunDefaults`), a job's claim starts the run (`startRunIfNeeded`), a script
 * job's finish ends it or retries it (`finishScriptJob`), an activity job's finish wakes its
 * parent (`finishActivityJob`), the dispatcher gives up on a job whose agents kept dying
 * (`giveUpJob`; a graph's node job fails its node instead), and `completeRun` is the one way a run reaches a terminal status. Every state
 * change appends its `run.*` event in the caller's transaction.
 */
import type { Pool, PoolClient } from "pg";
import {
  FlowError,
  GRAPH_ENGINE_WORKFLOWS_SQL,
  GRAPH_WORKFLOW,
  HANDLER_RUNS_IN_FLIGHT_LIMIT,
  LIVE_STATUSES_SQL,
  assertStorableJson,
  lifecyclePayload,
  newRunDefaults,
  trustOf,
  type LifecycleType,
  type LogChunk,
  type NewRun,
  type RunRequest,
  type ValueMasker,
} from "@flowsvc/core";
import { setRunCredentials } from "./credentials.js";
import { emitBatch, emitEvents, type EmitInput } from "./emit.js";
import { withTransaction } from "./pool.js";
import type { JobClaimant } from "./jobs.js";
import { resolveCallOfChild } from "./call-children.js";
import {
  finishRun,
  getRunInternalInProject,
  markJobAndRunRunning,
  markRunRunning,
  appendAnnotation,
  type RunInProject,
  type RunInternal,
} from "./runs.js";
import { grantNext, releaseRunLeases } from "./locks.js";
import { finishActivity } from "./activities.js";
import { releaseSignalClaims } from "./signals.js";
import { queueRunJob } from "./wake.js";
import { appendLogs } from "./logs.js";
import { mintId } from "./mint.js";
import { insertGraphNodes, settleNodeJob } from "./graph-runs.js";

/** The columns of a batch of new runs, one array each, in the order CREATE_RUNS_SQL unnests them. */
const runColumns = (runs: readonly NewRun[]): unknown[] => {
  const col = <T>(f: (r: NewRun) => T): T[] => runs.map(f);
  const json = (f: (r: NewRun) => unknown): string[] => runs.map((r) => JSON.stringify(f(r)));
  return [
    col((r) => r.id),
    col((r) => r.projectId),
    col((r) => r.workflow),
    col((r) => r.source),
    col((r) => r.filename),
    json((r) => r.interpreter),
    json((r) => r.env),
    json((r) => r.tags),
    json((r) => r.trigger),
    col((r) => r.idempotencyKey),
    col((r) => r.createdBy),
    col((r) => r.parentRunId),
    col((r) => (r.retry ? JSON.stringify(r.retry) : null)),
    col((r) => r.rerunOf),
    col((r) => r.trusted),
    json((r) => r.capabilities),
    col((r) => r.handlerName),
    col((r) => r.eventId),
    col((r) => r.generation),
    col(() => mintId("job")),
  ];
};

/**
 * Every run and its first job (a graph run has none: the graph driver runs its nodes), in one statement. A handler's run counts against its project's
 * handler runs in flight: where the batch's would pass HANDLER_RUNS_IN_FLIGHT_LIMIT, none of that
 * project's handler runs is inserted, and the project comes back with its count (`over`). A run
 * whose id or idempotency key is taken is not inserted (not returned as `run`).
 */
const CREATE_RUNS_SQL = `with input as (
     select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
                          $11::text[], $12::text[], $13::text[], $14::text[], $15::bool[], $16::text[], $17::text[], $18::text[], $19::int[], $20::text[])
       with ordinality as t(id, project_id, workflow, source, filename, interpreter, env, tags, trigger, idempotency_key,
                            created_by, parent_run_id, retry, rerun_of, trusted, capabilities, handler_name, event_id, generation, job_id, ord)
   ),
   counts as (
     select w.project_id, w.wanted,
            (select count(*)::int from runs r
              where r.project_id = w.project_id and r.handler_name is not null and r.status in (${LIVE_STATUSES_SQL})) as n
       from (select project_id, count(*)::int as wanted from input where handler_name is not null group by project_id) w
   ),
   r as (
     insert into runs (id, project_id, workflow, status, source, filename, interpreter, env, tags, trigger, idempotency_key, created_by,
                       parent_run_id, retry, rerun_of, trusted, handler_name, event_id, generation)
     select i.id, i.project_id, i.workflow, 'queued', i.source, i.filename, array(select jsonb_array_elements_text(i.interpreter::jsonb)), i.env::jsonb,
            array(select jsonb_array_elements_text(i.tags::jsonb)), i.trigger::jsonb, i.idempotency_key, i.created_by,
            i.parent_run_id, i.retry::jsonb, i.rerun_of, i.trusted, i.handler_name, i.event_id, i.generation
       from input i
      where i.handler_name is null or i.project_id in (select c.project_id from counts c where c.n + c.wanted <= $21)
      order by i.ord
     on conflict do nothing
     returning id
   ),
   j as (
     insert into jobs (id, run_id, status, kind, capabilities)
     select i.job_id, r.id, 'queued', 'run', array(select jsonb_array_elements_text(i.capabilities::jsonb)) from r join input i on i.id = r.id
      where i.workflow not in (${GRAPH_ENGINE_WORKFLOWS_SQL})
   )
   select 'run' as kind, r.id, 0 as n from r cross join lateral (select pg_notify('flowsvc_jobs', (select min(id collate "C") from r))) wake
   union all
   select 'over', c.project_id, c.n from counts c where c.n + c.wanted > $21`;

/**
 * The payload of the one NOTIFY on flowsvc_jobs that CREATE_RUNS_SQL sends for the runs it
 * inserted: the least of their ids (bytewise), unique to the transaction, so the process that
 * committed it can wake its own dispatcher at once (Listener.local) and drop the echo.
 */
export const createdRunsWake = (created: Iterable<string>): string | undefined => {
  let least: string | undefined;
  for (const id of created) if (least === undefined || id < least) least = id;
  return least;
};

export interface CreatedRuns {
  /** The runs inserted (each with its queued first job). */
  created: Set<string>;
  /** Projects whose handler runs were not inserted, being over the limit: their handler runs in flight. */
  overLimit: Map<string, number>;
}

/**
 * The one way runs are created: each request gets core's defaults (`newRunDefaults`), and every
 * run is inserted with its first job in one statement, however many the batch holds (an emit's
 * handler fan-out). Handler runs are counted against their project's limit under a per-project
 * lock, so concurrent emits cannot pass it together.
 */
export const createRuns = async (tx: PoolClient, requests: readonly RunRequest[]): Promise<CreatedRuns> => {
  const runs = requests.map(newRunDefaults);
  if (runs.length === 0) return { created: new Set(), overLimit: new Map() };
  // Count-then-insert must not interleave across concurrent emits of a project: serialise them per
  // project (only batches that start handler runs pay for it). The insert is a statement of its own
  // after the locks, so its snapshot sees every emit that held them before.
  const projects = [...new Set(runs.filter((r) => r.handlerName !== null).map((r) => r.projectId))].sort();
  if (projects.length > 0) {
    await tx.query(
      `select pg_advisory_xact_lock(hashtextextended('handlers-in-flight' || chr(31) || p, 16)) from (select unnest($1::text[]) as p order by 1) o`,
      [projects],
    );
  }
  const { rows } = await tx.query<{ kind: "run" | "over"; id: string; n: number }>(CREATE_RUNS_SQL, [
    ...runColumns(runs),
    HANDLER_RUNS_IN_FLIGHT_LIMIT,
  ]);
  return {
    created: new Set(rows.filter((r) => r.kind === "run").map((r) => r.id)),
    overLimit: new Map(rows.filter((r) => r.kind === "over").map((r) => [r.id, r.n])),
  };
};

/**
 * One run (`flow submit`, `flow spawn`, `flow rerun`), with a fresh id unless given. Under an
 * idempotency key already used in the project, nothing is written and the first run's id comes
 * back with `duplicate: true`.
 */
export const createRun = async (
  tx: PoolClient,
  request: Omit<RunRequest, "id"> & { id?: string },
): Promise<{ id: string; duplicate: boolean }> => {
  const id = request.id ?? mintId("run");
  const { created } = await createRuns(tx, [{ ...request, id }]);
  if (created.has(id)) return { id, duplicate: false };
  const { rows } = await tx.query<{ id: string }>(`select id from runs where project_id = $1 and idempotency_key = $2`, [
    request.projectId,
    request.idempotencyKey ?? null,
  ]);
  if (!rows[0]) throw new FlowError("conflict", `run ${id} already exists`);
  return { id: rows[0].id, duplicate: true };
};

/**
 * A person's submit (`POST {scoped}/runs`, or a FlowRun applied with kubectl): the run, the
 * credentials it declares (names only, resolved at claim), and the `manual` event every trigger
 * leaves on the bus, in the caller's transaction. A repeat under the same idempotency key writes
 * nothing and answers the first run.
 */
export const submitRun = async (
  tx: PoolClient,
  request: Omit<RunRequest, "id"> & { id?: string },
  submitted: { sender: string; credentials: Readonly<Record<string, string>> },
  opts: { busLocked?: boolean } = {},
): Promise<{ id: string; duplicate: boolean }> => {
  const r = await createRun(tx, request);
  if (r.duplicate) return r;
  await setRunCredentials(tx, r.id, submitted.credentials);
  await emitEvents(tx, [manualEvent(request, { runId: r.id, sender: submitted.sender })], opts);
  return r;
};

/** The `manual` event every submit leaves on the bus (submitRun). */
const manualEvent = (request: { projectId: string; trusted: boolean }, by: { runId: string; sender: string }): EmitInput => ({
  projectId: request.projectId,
  type: "manual",
  key: null,
  payload: { run_id: by.runId, sender: by.sender },
  sourceRunId: null,
  trusted: request.trusted,
  platform: true,
});

/**
 * submitRun in a transaction of its own (`POST {scoped}/runs` with a script): the `manual` event's
 * bus lock, and generic plans for the whole transaction (as every emit takes them: the run's insert,
 * planned for its parameters each time, cost more to plan than to run), in BEGIN's round trip.
 */
export const submitRunTransaction = (
  pool: Pool,
  request: Omit<RunRequest, "id"> & { id?: string },
  submitted: { sender: string; credentials: Readonly<Record<string, string>> },
): Promise<{ id: string; duplicate: boolean }> =>
  withTransaction(pool, (tx) => submitRun(tx, request, submitted, { busLocked: true }), {
    begin: busLockedBegin(request.projectId, "manual"),
  });

/**
 * A graph's submit (`POST {scoped}/runs` with a graph, or a pipeline compiled to one): the run
 * (workflow flowsvc-graph/v1 unless the request names flowsvc/pipeline/v1; no script job), its
 * nodes, all pending, and its input, with the `manual` event, in the caller's transaction; the
 * graph driver starts its first nodes on the notify. A repeat under the same idempotency key
 * writes nothing and answers the first run.
 */
export const submitGraphRun = async (
  tx: PoolClient,
  request: Omit<RunRequest, "id"> & { id?: string },
  submitted: {
    sender: string;
    nodes: ReadonlyArray<{ id: string; type: string; retry?: { attempts: number; backoff_ms: number } }>;
    input: unknown;
  },
): Promise<{ id: string; duplicate: boolean }> => {
  const r = await submitRun(
    tx,
    { ...request, workflow: request.workflow ?? GRAPH_WORKFLOW, interpreter: [] },
    { sender: submitted.sender, credentials: {} },
  );
  if (!r.duplicate) await insertGraphNodes(tx, r.id, { nodes: submitted.nodes, input: submitted.input });
  return r;
};

export interface LifecycleEvent {
  runId: string;
  type: LifecycleType;
  extra: Record<string, unknown>;
  publicUrl: string | undefined;
}

/** Appends a `run.*` event for a run in the same transaction as the state change it reports (the graph driver's run.awaiting and run.wait_expired too). */
export const emitLifecycle = async (db: PoolClient, { runId, type, extra, publicUrl }: LifecycleEvent): Promise<void> => {
  // The run and its project's names in one statement (this runs in every start's and end's transaction).
  const found = await getRunInternalInProject(db, runId);
  if (found) await appendLifecycle(db, found, { type, extra, publicUrl });
};

/** What a lifecycle event's emit is made of: the run's fields its payload, subject and trust come from. */
export type LifecycleRunFields = Pick<RunInternal, "id" | "project_id" | "status" | "workflow" | "tags" | "trigger" | "trusted">;

/** The emit of a `run.*` event for a run as it is now (with its project's names): appendLifecycle's, and the claim's one-statement start's. */
export const lifecycleEmit = (
  { run, org, project }: { run: LifecycleRunFields; org: string; project: string },
  { type, extra, publicUrl }: Omit<LifecycleEvent, "runId">,
): EmitInput => {
  const payload = lifecyclePayload({ ...run, org, project }, extra, publicUrl);
  // Lifecycle events carry the finishing run's subject and its trust, and are delivered like any event.
  const key = typeof run.trigger["key"] === "string" ? run.trigger["key"] : null;
  return { projectId: run.project_id, type, key, payload, sourceRunId: run.id, trusted: trustOf({ by: "run", run }), platform: true };
};

/** emitLifecycle for a run already read (a state change's update returned it as it is now). */
const appendLifecycle = async (
  db: PoolClient,
  found: RunInProject,
  { busLocked, ...event }: Omit<LifecycleEvent, "runId"> & { busLocked?: boolean },
): Promise<void> => {
  await emitEvents(db, [lifecycleEmit(found, event)], { busLocked: busLocked === true });
};

/** A job of the run was claimed: the run is running; the first time, `run.started` is appended. */
export const startRunIfNeeded = async (db: PoolClient, runId: string, publicUrl: string | undefined): Promise<void> => {
  if (await markRunRunning(db, runId)) await emitLifecycle(db, { runId, type: "run.started", extra: {}, publicUrl });
};

/**
 * A script job's claim: the job runs under its agent and its run is running (one statement);
 * the first time, `run.started` is appended (as startRunIfNeeded). False when the claim's token is
 * no longer the job's live one (markJobAndRunRunning): nothing started, the claim is job_lost.
 */
export const startJobAndRun = async (
  db: PoolClient,
  job: JobClaimant & { readonly runId: string; readonly publicUrl: string | undefined },
  opts: { busLocked?: boolean } = {},
): Promise<boolean> => {
  // The update answers the run as it is now: its event needs no second read.
  const { claimed, started } = await markJobAndRunRunning(db, job);
  if (started) await appendLifecycle(db, started, { type: "run.started", extra: {}, publicUrl: job.publicUrl, ...opts });
  return claimed;
};

/**
 * SQL for BEGIN's round trip of a transaction that emits one `type` event in `projectId`: that
 * event's bus lock and generic plans (emit.ts busLocksSql, as every emit takes them), so the emit
 * itself needs no statement of its own for them (`busLocked`). The lock is shared: taking it when
 * the event does not come after all (the run had moved on) holds nobody up but a `flow
 * wait-event` on that type, until the commit.
 */
const busLockedBegin = (projectId: string, type: string): string =>
  emitBatch.begin([{ projectId, type, key: null, payload: null, sourceRunId: null, trusted: true }]);

/** startJobAndRun in a transaction of its own (a script job's claim), `run.started`'s bus lock in BEGIN's round trip: one round trip fewer a run. */
export const startJobAndRunTransaction = (
  pool: Pool,
  job: Parameters<typeof startJobAndRun>[1] & { readonly projectId: string },
): Promise<boolean> =>
  withTransaction(pool, (tx) => startJobAndRun(tx, job, { busLocked: true }), { begin: busLockedBegin(job.projectId, "run.started") });

export type RunOutcome =
  | { status: "succeeded"; output: Record<string, unknown> }
  | { status: "failed"; error: string; output?: Record<string, unknown> }
  | { status: "cancelled"; reason: string };

/** The columns a terminal status writes, and the fields its `run.*` event adds. */
const outcomeColumns = (
  o: RunOutcome,
): { output: Record<string, unknown> | null; error: string | null; extra: Record<string, unknown> } => {
  switch (o.status) {
    case "succeeded":
      return { output: o.output, error: null, extra: { output: o.output } };
    case "failed":
      return { output: o.output ?? null, error: o.error, extra: { error: o.error } };
    case "cancelled":
      return { output: null, error: o.reason, extra: { reason: o.reason } };
  }
};

/** The run's activities nobody collected, as the annotation the finished run gets (undefined: none). */
const uncollectedNote = (unreported: ReadonlyArray<{ name: string; status: string; exit_code: number | null }>): string | undefined => {
  if (unreported.length === 0) return undefined;
  const list = unreported.map((a) => `\`${a.name}\` (${a.status}${a.exit_code === null ? "" : `, exit ${a.exit_code}`})`).join(", ");
  return `${unreported.length} ${unreported.length === 1 ? "activity was" : "activities were"} never collected: ${list}`;
};

type Uncollected = { name: string; status: string; exit_code: number | null };

/**
 * An ending run's first steps in one statement: its leases are released (as releaseRunLeases;
 * each group's next waiter is granted) and its activities nobody collected are listed (as
 * uncollectedActivities). With `jobId` (a script job's successful finish) that live job is done
 * too (as endLiveJob), and a job no longer live (or, with `tokenDigest`, no longer held by that
 * token) is refused with `job_lost` (the caller's transaction then rolls back what this statement did).
 */
const releaseLeasesListUncollected = async (
  db: PoolClient,
  runId: string,
  job?: { readonly id: string; readonly tokenDigest: Buffer | undefined },
): Promise<Uncollected[]> => {
  const jobId = job?.id;
  const { rows } = await db.query<{ job_ended: boolean; released: Array<{ project_id: string; grp: string }>; uncollected: Uncollected[] }>(
    `with job as (
       update jobs set status = 'done', token_digest = null, lease_expires_at = null, updated_at = now()
        where $2::text is not null and id = $2 and ($3::bytea is null or token_digest = $3)
          and status in ('dispatched', 'running') returning 1),
     released as (
       update lock_leases set released_at = now() where run_id = $1 and (released_at is null) is true returning project_id, grp)
     select exists (select from job) as job_ended,
            (select coalesce(jsonb_agg(distinct jsonb_build_object('project_id', project_id, 'grp', grp)), '[]') from released) as released,
            (select coalesce(jsonb_agg(jsonb_build_object('name', name, 'status', status, 'exit_code', exit_code) order by position), '[]')
               from activities where run_id = $1 and not collected) as uncollected`,
    // `(released_at is null) is true` keeps the open-lease partial index (every run's) out of the
    // generic plan, which this transaction forces: the run's leases by run_id (as releaseRunLeases).
    [runId, jobId ?? null, job?.tokenDigest ?? null],
  );
  const { job_ended, released, uncollected } = rows[0]!;
  if (jobId !== undefined && !job_ended) throw jobEnded(jobId);
  for (const g of released) await grantNext(db, g.project_id, g.grp);
  return uncollected;
};

/**
 * Ends a run with a terminal status: its leases are released, uncollected activities annotated,
 * and `run.<status>` appended. False (and no event) when the run had already ended.
 */
export const completeRun = (db: PoolClient, runId: string, outcome: RunOutcome, publicUrl: string | undefined): Promise<boolean> =>
  endRun(db, { runId, outcome, publicUrl });

interface RunEnding {
  readonly runId: string;
  readonly outcome: RunOutcome;
  readonly publicUrl: string | undefined;
  /** A live job of the run that is done with it, in the run's first statement (releaseLeasesListUncollected). */
  readonly jobId?: string;
  /** With `jobId`: the job must still be held by this token (see endLiveJob). */
  readonly tokenDigest?: Buffer | undefined;
  /** The transaction took the bus lock of `run.<status>` in the run's project already (finishScriptJobTransaction). */
  readonly busLocked?: boolean;
}

const endRun = async (db: PoolClient, { runId, outcome, publicUrl, jobId, tokenDigest, busLocked }: RunEnding): Promise<boolean> => {
  const job = jobId === undefined ? undefined : { id: jobId, tokenDigest };
  const note = uncollectedNote(await releaseLeasesListUncollected(db, runId, job));
  if (note !== undefined) await appendAnnotation(db, runId, note);
  const { output, error, extra } = outcomeColumns(outcome);
  const ended = await finishRun(db, runId, { status: outcome.status, output, error });
  if (!ended) return false;
  await appendLifecycle(db, ended, { type: `run.${outcome.status}`, extra, publicUrl, busLocked });
  // Only a child run (parent_run_id set) can be what a parent's `flow call` waits on.
  if (ended.hasParent) await resolveCallOfChild(db, runId);
  return true;
};

/**
 * A failed attempt of a run with a retry policy (`flow submit --retry`) starts over: the recorded
 * calls are purged, the signals it took are queued again, its leases are released and its
 * activities forgotten; the next attempt is queued after the backoff. Returns false when no
 * attempt is left (the caller then fails the run).
 */
export const retryIfAllowed = async (db: PoolClient, runId: string, jobId: string, error: string): Promise<boolean> => {
  const { rows } = await db.query<{ retry: { attempts: number; backoff_ms: number } | null; attempt: number }>(
    `select retry, attempt from runs where id = $1 for update`,
    [runId],
  );
  const r = rows[0];
  if (!r?.retry || r.attempt >= r.retry.attempts) return false;
  await db.query(`delete from journal where run_id = $1`, [runId]);
  await releaseSignalClaims(db, runId);
  await releaseRunLeases(db, runId);
  // `(status = 'queued') is true`: by the run's jobs (jobs_run), never the whole ready queue (jobs_ready's
  // predicate is not proven from this form; the generic plan made on a small table scanned it all).
  await db.query(`delete from jobs where run_id = $1 and kind = 'activity' and (status = 'queued') is true`, [runId]);
  await db.query(`delete from activities where run_id = $1`, [runId]);
  await db.query(`update runs set attempt = attempt + 1, error = $2, substate = null, deadline = null where id = $1`, [runId, error]);
  await queueRunJob(db, runId, r.retry.backoff_ms);
  const note = `flowsvc: attempt ${r.attempt} of ${r.retry.attempts} failed (${error}); attempt ${r.attempt + 1} starts in ${r.retry.backoff_ms} ms\n`;
  await appendLogs(db, runId, jobId, [{ stream: "system", data: note }]);
  return true;
};

/**
 * A live job (dispatched or running) is done: its token dies with it. False when it was not live
 * any more (finished already, or taken over): the caller must not end its run a second time.
 * With `tokenDigest`, also false when the job is live under another token (dispatched again): a
 * caller that did not look the token up first (the finish route's quick path) checks it here.
 */
const endLiveJob = async (tx: PoolClient, jobId: string, tokenDigest?: Buffer): Promise<boolean> => {
  const { rowCount } = await tx.query(
    `update jobs set status = 'done', token_digest = null, lease_expires_at = null, updated_at = now()
      where id = $1 and ($2::bytea is null or token_digest = $2) and status in ('dispatched', 'running')`,
    [jobId, tokenDigest ?? null],
  );
  return (rowCount ?? 0) > 0;
};

const jobEnded = (jobId: string): FlowError =>
  new FlowError("job_lost", `job ${jobId} has already finished, or was dispatched again: its finish is not taken twice`);

export interface ScriptJobFinish {
  job: { id: string; run_id: string };
  /**
   * The digest of the token the finish came with: the job must still be held by it. The route's
   * quick path (a token seen live at the claim, not looked up again) relies on this check.
   */
  tokenDigest?: Buffer | undefined;
  exitCode: number;
  /** The script's outputs (`flow output`), as the agent sent them: masked here before they are stored. */
  outputs: Record<string, string>;
  /** The agent's error text, if any: masked here; a nonzero exit without one says the exit code. */
  error?: string | undefined;
  durationMs: number;
  /** The run's project's secret values: outputs and error are stored, and reach the `run.*` events, masked. */
  masker: Pick<ValueMasker, "text" | "json">;
  publicUrl: string | undefined;
}

export type ScriptJobStatus = "succeeded" | "retrying" | "failed";

/**
 * The agent finished a run's script job (POST /agent/v1/finish): exit 0 succeeds the run; a
 * nonzero exit retries it while its retry policy has attempts left, else fails it. A job that is
 * no longer live (a second finish) is refused with `job_lost`, and outputs or an error Postgres
 * cannot store with `invalid_argument`; either changes nothing.
 */
export const finishScriptJob = async (tx: PoolClient, f: ScriptJobFinish, opts: { busLocked?: boolean } = {}): Promise<ScriptJobStatus> => {
  // What Postgres cannot store (NUL, a lone surrogate) is refused by name before anything is written.
  assertStorableJson({ outputs: f.outputs, error: f.error }, "finish");
  const runId = f.job.run_id;
  if (f.exitCode === 0) {
    const output = { ...(f.masker.json(f.outputs) as Record<string, string>), exit_code: 0, duration_ms: f.durationMs };
    // The job's end rides on the run's first statement (one round trip fewer); not live: job_lost.
    await endRun(tx, {
      runId,
      outcome: { status: "succeeded", output },
      publicUrl: f.publicUrl,
      jobId: f.job.id,
      tokenDigest: f.tokenDigest,
      busLocked: opts.busLocked === true,
    });
    return "succeeded";
  }
  if (!(await endLiveJob(tx, f.job.id, f.tokenDigest))) throw jobEnded(f.job.id);
  const error = f.masker.text(f.error ?? `the script exited with code ${f.exitCode}`);
  if (await retryIfAllowed(tx, runId, f.job.id, error)) return "retrying";
  await completeRun(tx, runId, { status: "failed", error, output: { exit_code: f.exitCode, duration_ms: f.durationMs } }, f.publicUrl);
  return "failed";
};

/**
 * finishScriptJob in a transaction of its own (`POST /agent/v1/finish`), after the job's last log
 * lines. A success (exit 0) takes its `run.succeeded` event's bus lock, and generic plans for the
 * transaction (as every emit takes them), in BEGIN's round trip: one round trip fewer a run. Any
 * other ending takes its event's lock where it emits it, as before.
 */
export const finishScriptJobTransaction = (
  pool: Pool,
  f: ScriptJobFinish & { readonly projectId: string; readonly log: readonly LogChunk[] },
): Promise<ScriptJobStatus> => {
  const succeeds = f.exitCode === 0;
  const begin = succeeds ? busLockedBegin(f.projectId, "run.succeeded") : undefined;
  return withTransaction(
    pool,
    async (tx) => {
      await appendLogs(tx, f.job.run_id, f.job.id, f.log);
      return finishScriptJob(tx, f, { busLocked: succeeds });
    },
    { begin },
  );
};

/**
 * The agent finished an activity child's job (POST /agent/v1/finish-activity): the child is
 * recorded and its parent's waits on it resolve. `outcome` comes sealed and masked by the caller.
 * A second finish is refused with `job_lost`.
 */
export const finishActivityJob = async (
  tx: PoolClient,
  f: { job: { id: string }; activityId: string; outcome: { exit_code: number; stdout_b64: string; error?: string | undefined } },
): Promise<"succeeded" | "failed"> => {
  if (!(await endLiveJob(tx, f.job.id))) throw jobEnded(f.job.id);
  await finishActivity(tx, f.activityId, f.outcome);
  return f.outcome.exit_code === 0 ? "succeeded" : "failed";
};

/**
 * The dispatcher gives up on a job whose agents kept dying (dispatched `attempts` times, never
 * finished): an activity child fails (its parent decides), a script run fails. Returns the error
 * recorded, or undefined when the job was no longer live.
 */
export const giveUpJob = async (
  tx: PoolClient,
  g: { job: { id: string; run_id: string; kind: string; activity_id: string | null }; attempts: number; publicUrl: string | undefined },
): Promise<string | undefined> => {
  const error = `the job was dispatched ${g.attempts} times and no agent finished it`;
  if (!(await endLiveJob(tx, g.job.id))) return undefined;
  if (g.job.kind === "node") await settleNodeJob(tx, g.job.id, { ok: false, error });
  else if (g.job.kind === "activity" && g.job.activity_id)
    await finishActivity(tx, g.job.activity_id, { exit_code: 1, stdout_b64: "", error });
  else await completeRun(tx, g.job.run_id, { status: "failed", error }, g.publicUrl);
  return error;
};
