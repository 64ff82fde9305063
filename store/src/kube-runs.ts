// What the FlowRun mirror (controller/src/kube/flowrun-mirror.ts) reads from Postgres: the runs a
// FlowRun mirrors (in flight, or finished recently), with their project's names, in one query; a
// finished run's last output lines for its summary; and one run's place for RunOwners.
import type { Pool, PoolClient } from "pg";
import { LIVE_STATUSES_SQL, TERMINAL_STATUSES_SQL, type RunStatus } from "@flowsvc/core";

type Db = Pool | PoolClient;

export interface MirroredRun {
  id: string;
  org: string;
  project: string;
  status: RunStatus;
  substate: { name: string; kind?: string } | null;
  idempotency_key: string | null;
  error: string | null;
  output: Record<string, unknown> | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  filename: string;
  interpreter: string[];
  tags: string[];
}

const COLUMNS = `r.id, o.name as org, p.name as project, r.status, r.substate, r.idempotency_key, r.error, r.output,
  r.created_at, r.started_at, r.finished_at, r.filename, r.interpreter, r.tags`;
const FROM = `from runs r join projects p on p.id = r.project_id join orgs o on o.id = p.org_id`;

/**
 * Runs in flight, and runs that finished after `finishedSince` (both served by migration 009's
 * indexes). A sweep, once a mirror pass: given as a query config, so it is not prepared (pool.ts)
 * and is planned for its value on each call. Prepared, its generic plan made while runs was small
 * (a new server's connections keep it) scanned every run on every pass (generic-plans.test.ts).
 */
export const listMirroredRuns = async (db: Db, finishedSince: Date): Promise<MirroredRun[]> => {
  const { rows } = await db.query<MirroredRun>({
    text: `select ${COLUMNS} ${FROM} where r.status in (${LIVE_STATUSES_SQL})
     union all
     select ${COLUMNS} ${FROM} where r.finished_at > $1 and r.status in (${TERMINAL_STATUSES_SQL})`,
    values: [finishedSince],
  });
  return rows;
};

export const getMirroredRun = async (db: Db, runId: string): Promise<MirroredRun | undefined> => {
  const { rows } = await db.query<MirroredRun>(`select ${COLUMNS} ${FROM} where r.id = $1`, [runId]);
  return rows[0];
};

/** The last `maxBytes` (about) of a run's stdout, already masked as stored; reads a handful of rows only. */
export const runOutputTail = async (db: Db, runId: string, maxBytes: number): Promise<string> => {
  const { rows } = await db.query<{ data: string }>(
    `select right(data, $2) as data from run_logs where run_id = $1 and stream = 'stdout' order by id desc limit 8`,
    [runId, maxBytes],
  );
  let out = "";
  for (const r of rows) {
    out = r.data + out;
    if (out.length >= maxBytes) break;
  }
  return out.length > maxBytes ? out.slice(out.length - maxBytes) : out;
};
