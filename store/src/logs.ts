import type { Pool, PoolClient } from "pg";
import type { LogChunk } from "@flowsvc/core";

type Db = Pool | PoolClient;

/** Appends masked output in order, in one statement, and nudges followers of the run. */
export const appendLogs = async (db: Db, runId: string, jobId: string | null, chunks: readonly LogChunk[]): Promise<void> => {
  if (chunks.length === 0) return;
  await db.query(
    `with ins as (
       insert into run_logs (run_id, job_id, stream, data)
       select $1, $2, c.stream, c.data from unnest($3::text[], $4::text[]) with ordinality as c(stream, data, n) order by c.n
       returning 1)
     select pg_notify('flowsvc_logs', $1) from (select 1 from ins limit 1) x`,
    [runId, jobId, chunks.map((c) => c.stream), chunks.map((c) => c.data)],
  );
};

export interface LogRow {
  id: number;
  stream: string;
  data: string;
}

export const readLogs = async (db: Db, runId: string, afterId: number, limit = 1000): Promise<LogRow[]> => {
  const { rows } = await db.query<{ id: string; stream: string; data: string }>(
    `select id, stream, data from run_logs where run_id = $1 and id > $2 order by id limit $3`,
    [runId, afterId, limit],
  );
  return rows.map((r) => ({ id: Number(r.id), stream: r.stream, data: r.data }));
};
