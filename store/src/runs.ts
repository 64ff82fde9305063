import type { Pool, PoolClient } from "pg";
import type { JobClaimant } from "./jobs.js";

type Db = Pool | PoolClient;

import { TERMINAL_STATUSES_SQL, type RunStatus, type TerminalStatus } from "@flowsvc/core";

export { TERMINAL_STATUSES, type RunStatus } from "@flowsvc/core";

/** A run as the API shows it: never the source, never env values (they may be secret-like). */
export interface RunView {
  id: string;
  workflow: string;
  status: RunStatus;
  substate: { name: string; kind?: string } | null;
  deadline: string | null;
  filename: string;
  interpreter: string[];
  tags: string[];
  trigger: Record<string, unknown>;
  idempotency_key: string | null;
  attempt: number;
  retry: { attempts: number; backoff_ms: number } | null;
  parent_run_id: string | null;
  rerun_of: string | null;
  output: Record<string, unknown> | null;
  error: string | null;
  annotations: Array<{ markdown: string; at: string }>;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

/** RunView's columns, unqualified (read with toRunView). */
export const RUN_VIEW_COLUMNS = `id, workflow, status, substate, deadline, filename, interpreter, tags, trigger, idempotency_key,
  attempt, retry, parent_run_id, rerun_of, output, error, annotations, created_at, started_at, finished_at`;

export interface RunRowRaw {
  id: string;
  workflow: string;
  status: RunStatus;
  substate: RunView["substate"];
  deadline: Date | null;
  filename: string;
  interpreter: string[];
  tags: string[];
  trigger: Record<string, unknown>;
  idempotency_key: string | null;
  attempt: number;
  retry: RunView["retry"];
  parent_run_id: string | null;
  rerun_of: string | null;
  output: Record<string, unknown> | null;
  error: string | null;
  annotations: RunView["annotations"];
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
export const toRunView = (r: RunRowRaw): RunView => ({
  ...r,
  deadline: iso(r.deadline),
  created_at: r.created_at.toISOString(),
  started_at: iso(r.started_at),
  finished_at: iso(r.finished_at),
});

/**
 * The run whose id is $2, as a relation named runs, for a caller that then checks its project
 * (`where project_id = $1`). The fence (`offset 0`) keeps the project out of the lookup: planned
 * while runs is empty (a new server's connections keep their generic plans), `project_id = $1 and
 * id = $2` chose an index on project_id and read every run of the project per call.
 */
export const RUN_BY_ID_SQL = `(select * from runs where id = $2 offset 0) runs`;

export const getRunView = async (db: Db, projectId: string, runId: string): Promise<RunView | undefined> => {
  const { rows } = await db.query<RunRowRaw>(`select ${RUN_VIEW_COLUMNS} from ${RUN_BY_ID_SQL} where project_id = $1`, [projectId, runId]);
  return rows[0] ? toRunView(rows[0]) : undefined;
};

export const listRunViews = async (
  db: Db,
  projectId: string,
  filter: { status?: string | undefined; tag?: string | undefined; handler?: string | undefined; limit: number },
): Promise<RunView[]> => {
  const { rows } = await db.query<RunRowRaw>(
    `select ${RUN_VIEW_COLUMNS} from runs where project_id = $1
       and ($2::text is null or status = $2) and ($3::text is null or $3 = any(tags))
       and ($5::text is null or handler_name = $5)
     order by created_at desc, id desc limit $4`,
    [projectId, filter.status ?? null, filter.tag ?? null, filter.limit, filter.handler ?? null],
  );
  return rows.map(toRunView);
};

/** What the server needs about a run to hand a job to an agent or to finish it. */
export interface RunInternal {
  id: string;
  project_id: string;
  workflow: string;
  status: RunStatus;
  source: string;
  filename: string;
  interpreter: string[];
  env: Record<string, string>;
  tags: string[];
  trigger: Record<string, unknown>;
  output: Record<string, unknown> | null;
  error: string | null;
  /** The event that started a handler run, and whether that event may see secrets. */
  event_id: string | null;
  handler_name: string | null;
  trusted: boolean;
}

/** RunInternal's columns, for every query that reads one (getRunInternal, jobAndRunByToken). */
export const RUN_INTERNAL_COLUMNS = [
  "id",
  "project_id",
  "workflow",
  "status",
  "source",
  "filename",
  "interpreter",
  "env",
  "tags",
  "trigger",
  "output",
  "error",
  "event_id",
  "handler_name",
  "trusted",
] as const satisfies ReadonlyArray<keyof RunInternal>;
const RUN_INTERNAL_SELECT = RUN_INTERNAL_COLUMNS.join(", ");

export const getRunInternal = async (db: Db, runId: string, forUpdate = false): Promise<RunInternal | undefined> => {
  const { rows } = await db.query<RunInternal>(`select ${RUN_INTERNAL_SELECT} from runs where id = $1 ${forUpdate ? "for update" : ""}`, [
    runId,
  ]);
  return rows[0];
};

/** A run (as getRunInternal) with its project's org and project names ("" when the project is gone, as a lifecycle payload had them). */
export interface RunInProject {
  run: RunInternal;
  org: string;
  project: string;
}

/**
 * The select list and joins that read a RunInProject from `source` (a table or a CTE holding
 * RUN_INTERNAL_COLUMNS): `run` (the row as JSON), `org`, `project`. A state change's own update
 * returns what its `run.*` event needs with it, instead of reading the run again.
 */
const runInProjectSql = (source: string): { columns: string; joins: string } => ({
  columns: `(select to_jsonb(x) from (select ${RUN_INTERNAL_COLUMNS.map((c) => `r.${c}`).join(", ")}) x) as run, o.name as org, p.name as project`,
  joins: `${source} r left join projects p on p.id = r.project_id left join orgs o on o.id = p.org_id`,
});

const runInProjectOf = (row: { run: RunInternal; org: string | null; project: string | null }): RunInProject => ({
  run: row.run,
  org: row.org ?? "",
  project: row.project ?? "",
});

/** A run with its project's org and project names (RunInProject), in one statement. */
export const getRunInternalInProject = async (db: Db, runId: string): Promise<RunInProject | undefined> => {
  const { columns, joins } = runInProjectSql("runs");
  const { rows } = await db.query<{ run: RunInternal; org: string | null; project: string | null }>(
    `select ${columns} from ${joins} where r.id = $1`,
    [runId],
  );
  const row = rows[0];
  return row && runInProjectOf(row);
};

/** queued/parked -> running. Returns true when this call started the run for the first time. */
export const markRunRunning = async (db: PoolClient, runId: string): Promise<boolean> => {
  const { rows } = await db.query<{ first: boolean }>(
    `update runs set status = 'running', substate = null, deadline = null, wake_requested = false, started_at = coalesce(started_at, now())
      where id = $1 and status in ('queued', 'parked')
      returning (started_at = now()) as first`,
    [runId],
  );
  return rows[0]?.first ?? false;
};

/**
 * A script job's claim in one statement: the job runs under `agentId` with a fresh lease, if the
 * claim's token is still its live one (as jobs.ts's markJobRunning), and only then its run is
 * running (as markRunRunning). `claimed` false: the job was requeued, dispatched again or ended
 * since the claim read it, and nothing changed. `started`: the run as it is now (RunInProject,
 * for its `run.started` event) when this call started it for the first time.
 */
export const markJobAndRunRunning = async (
  db: PoolClient,
  job: JobClaimant & { readonly runId: string },
): Promise<{ claimed: boolean; started?: RunInProject }> => {
  const { columns, joins } = runInProjectSql("started");
  const { rows } = await db.query<{ first: boolean | null; run: RunInternal; org: string | null; project: string | null }>(
    `with job as (
       update jobs set status = 'running', agent_id = $2, lease_expires_at = now() + ($3::int * interval '1 millisecond'), updated_at = now()
        where id = $1 and token_digest = $5 and status in ('dispatched', 'running')
        returning run_id),
     started as (
       update runs set status = 'running', substate = null, deadline = null, wake_requested = false, started_at = coalesce(started_at, now())
         from job
        where runs.id = $4 and runs.id = job.run_id and runs.status in ('queued', 'parked')
        returning ${RUN_INTERNAL_SELECT}, (started_at = now()) as first)
     select r.first, ${columns} from job left join (${joins}) on true`,
    [job.jobId, job.agentId, job.leaseMs, job.runId, job.digest],
  );
  const row = rows[0];
  if (!row) return { claimed: false };
  return row.first ? { claimed: true, started: runInProjectOf(row) } : { claimed: true };
};

/**
 * A live run takes a terminal status (the one write of one): undefined when it had already ended,
 * else the run as it is now (RunInProject, for its `run.*` event) and whether it has a parent run
 * (only then can a parent's `flow call` wait on it).
 */
export const finishRun = async (
  db: PoolClient,
  runId: string,
  end: { status: TerminalStatus; output: Record<string, unknown> | null; error: string | null },
): Promise<(RunInProject & { hasParent: boolean }) | undefined> => {
  const { columns, joins } = runInProjectSql("ended");
  // The notify rides on the update (one statement): it fires only when the run did end here.
  const { rows } = await db.query<{ has_parent: boolean; run: RunInternal; org: string | null; project: string | null }>(
    `with ended as (
       update runs set status = $2, output = $3, error = $4, finished_at = now(), substate = null, deadline = null
        where id = $1 and status not in (${TERMINAL_STATUSES_SQL}) returning ${RUN_INTERNAL_SELECT}, parent_run_id)
     select pg_notify('flowsvc_runs', r.id), r.parent_run_id is not null as has_parent, ${columns} from ${joins}`,
    [runId, end.status, end.output, end.error],
  );
  const row = rows[0];
  return row && { ...runInProjectOf(row), hasParent: row.has_parent };
};

export const appendAnnotation = async (db: Db, runId: string, markdown: string): Promise<void> => {
  await db.query(
    `update runs set annotations = annotations || jsonb_build_array(jsonb_build_object('markdown', $2::text, 'at', now())) where id = $1`,
    [runId, markdown],
  );
};

export const getRunStatus = async (db: Db, runId: string): Promise<RunStatus | undefined> => {
  const { rows } = await db.query<{ status: RunStatus }>(`select status from runs where id = $1`, [runId]);
  return rows[0]?.status;
};
