import type { Pool, PoolClient } from "pg";
import { PIPELINE_WORKFLOW, type LogChunk } from "@flowsvc/core";

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
  /** A pipeline run's line: the job that wrote it (its node id without the `--stepN` suffix); null otherwise. */
  job: string | null;
}

/**
 * The run's log after `afterId`. A pipeline run's rows (workflow `flowsvc/pipeline/v1`) carry the
 * job of the node whose agent job wrote them (the job row's `node_id`: a node's `job_id` is cleared
 * when its attempt settles, so a log read after the job ended would lose its prefix).
 */
export const readLogs = async (db: Db, runId: string, afterId: number, limit = 1000): Promise<LogRow[]> => {
  const { rows } = await db.query<{ id: string; stream: string; data: string; node_id: string | null }>(
    `select l.id, l.stream, l.data,
            case when r.workflow = '${PIPELINE_WORKFLOW}' then j.node_id end as node_id
       from run_logs l join runs r on r.id = l.run_id
       left join jobs j on j.id = l.job_id
      where l.run_id = $1 and l.id > $2 order by l.id limit $3`,
    [runId, afterId, limit],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    stream: r.stream,
    data: r.data,
    job: r.node_id === null ? null : r.node_id.replace(/--step\d+$/, ""),
  }));
};
