import type { PoolClient, Pool } from "pg";
import { FlowError } from "@flowsvc/core";
import { pendingEntries, resolveEntry, type WaitEntry } from "./journal-entries.js";
import { mintId } from "./mint.js";
import { wakeRun } from "./wake.js";

export interface ActivityRow {
  id: string;
  run_id: string;
  name: string;
  position: number;
  argv: string[];
  requires: string[];
  status: "queued" | "running" | "succeeded" | "failed";
  exit_code: number | null;
  stdout_b64: string | null;
  error: string | null;
  collected: boolean;
}

/** ActivityRow's columns, named: a prepared `select *` fails once a migration adds a column. */
const COLUMNS = "id, run_id, name, position, argv, requires, status, exit_code, stdout_b64, error, collected";

/** An activity child in one of these has ended (activities are never cancelled on their own). */
const ACTIVITY_ENDED = ["succeeded", "failed"];

/** A fan-out child: an activity row and its own job, dispatched to an agent with `requires`. */
export const submitActivity = async (
  tx: PoolClient,
  {
    runId,
    position,
    name,
    argv,
    requires,
  }: { runId: string; position: number; name: string; argv: readonly string[]; requires: readonly string[] },
): Promise<string> => {
  const existing = await tx.query<{ position: number }>(`select position from activities where run_id = $1 and name = $2`, [runId, name]);
  if (existing.rows[0]) {
    throw new FlowError(
      "conflict",
      `activity names must be distinct: "${name}" was already submitted at call #${existing.rows[0].position}`,
    );
  }
  const id = mintId("act");
  await tx.query(`insert into activities (id, run_id, name, position, argv, requires, status) values ($1, $2, $3, $4, $5, $6, 'queued')`, [
    id,
    runId,
    name,
    position,
    argv,
    requires,
  ]);
  await tx.query(`insert into jobs (id, run_id, status, kind, activity_id, capabilities) values ($1, $2, 'queued', 'activity', $3, $4)`, [
    mintId("job"),
    runId,
    id,
    requires,
  ]);
  await tx.query(`select pg_notify('flowsvc_jobs', $1)`, [runId]);
  return id;
};

export const getActivityByName = async (tx: PoolClient, runId: string, name: string): Promise<ActivityRow | undefined> => {
  const { rows } = await tx.query<ActivityRow>(`select ${COLUMNS} from activities where run_id = $1 and name = $2 for update`, [
    runId,
    name,
  ]);
  return rows[0];
};

export const getActivity = async (db: Pool | PoolClient, id: string): Promise<ActivityRow | undefined> => {
  const { rows } = await db.query<ActivityRow>(`select ${COLUMNS} from activities where id = $1`, [id]);
  return rows[0];
};

/** activity / activity-collect: done with the child's stdout and exit code once it ended. */
export const evaluateCollect = async (tx: PoolClient, runId: string, e: WaitEntry): Promise<WaitEntry> => {
  const a = await getActivityByName(tx, runId, e.name);
  if (!a || !ACTIVITY_ENDED.includes(a.status)) return e;
  await tx.query(`update activities set collected = true where id = $1`, [a.id]);
  return resolveEntry(tx, runId, e.position, { stdout_b64: a.stdout_b64 ?? "", exit: a.exit_code ?? 1 });
};

/** activity-wait-all: done when every uncollected child ended; reports (and marks) them. */
export const evaluateWaitAll = async (tx: PoolClient, runId: string, e: WaitEntry): Promise<WaitEntry> => {
  const { rows } = await tx.query<{ status: string }>(`select status from activities where run_id = $1 and not collected for update`, [
    runId,
  ]);
  if (rows.some((r) => !ACTIVITY_ENDED.includes(r.status))) return e;
  await tx.query(`update activities set collected = true where run_id = $1 and not collected`, [runId]);
  return resolveEntry(tx, runId, e.position, { failed: rows.filter((r) => r.status === "failed").length });
};

export const markActivityRunning = async (db: Pool | PoolClient, id: string): Promise<void> => {
  await db.query(`update activities set status = 'running' where id = $1 and status = 'queued'`, [id]);
};

/** A child ended: record it, then resolve the parent's calls waiting on it and wake the parent. */
export const finishActivity = async (
  tx: PoolClient,
  activityId: string,
  outcome: { exit_code: number; stdout_b64: string; error?: string | undefined },
): Promise<void> => {
  const { rows } = await tx.query<{ run_id: string }>(
    `update activities set status = $2, exit_code = $3, stdout_b64 = $4, error = $5, finished_at = now()
      where id = $1 and status in ('queued', 'running') returning run_id`,
    [activityId, outcome.exit_code === 0 ? "succeeded" : "failed", outcome.exit_code, outcome.stdout_b64, outcome.error ?? null],
  );
  const runId = rows[0]?.run_id;
  if (!runId) return;
  await tx.query(`select 1 from runs where id = $1 for update`, [runId]);
  let resolved = false;
  for (const e of await pendingEntries(tx, runId, ["activity", "activity-collect", "activity-wait-all"])) {
    const after = e.kind === "activity-wait-all" ? await evaluateWaitAll(tx, runId, e) : await evaluateCollect(tx, runId, e);
    resolved ||= after.status === "done";
  }
  if (resolved) await wakeRun(tx, runId);
};

/** For `flow status`: the run's activities. */
export const listActivities = async (
  db: Pool | PoolClient,
  runId: string,
): Promise<Array<{ name: string; status: string; exit_code: number | null }>> => {
  const { rows } = await db.query<{ name: string; status: string; exit_code: number | null }>(
    `select name, status, exit_code from activities where run_id = $1 order by position`,
    [runId],
  );
  return rows;
};

/** Children that ended (or not) without anyone collecting them: annotated on the finished run. */
export const uncollectedActivities = async (
  tx: PoolClient,
  runId: string,
): Promise<Array<{ name: string; status: string; exit_code: number | null }>> => {
  const { rows } = await tx.query<{ name: string; status: string; exit_code: number | null }>(
    `select name, status, exit_code from activities where run_id = $1 and not collected order by position`,
    [runId],
  );
  return rows;
};
