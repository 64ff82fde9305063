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
  /** A pipeline run's line: the job that wrote it (its node id without the `--stepN` suffix); null otherwise. */
  job: string | null;
}

/** A pipeline run's rows (a graph run of a .yaml/.yml file, until a pipeline run has a workflow of its own) carry their job. */
const JOB_OF_ROW = `case when r.workflow = 'flowsvc-graph/v1' and r.filename ~ '[.]ya?ml$' then n.node_id end`;
const ROWS_OF_RUN = `from run_logs l join runs r on r.id = l.run_id
       left join graph_nodes n on n.run_id = l.run_id and n.job_id = l.job_id
      where l.run_id = $1 and l.id > $2 order by l.id`;
/** A pipeline job's node id without its `--stepN` suffix. */
const jobOf = (nodeId: string | null): string | null => (nodeId === null ? null : nodeId.replace(/--step\d+$/, ""));

/**
 * The run's log after `afterId`. A pipeline run's rows (a graph run of a .yaml/.yml file, until a
 * pipeline run has a workflow of its own) carry the job of the node whose agent job wrote them.
 */
export const readLogs = async (db: Db, runId: string, afterId: number, limit = 1000): Promise<LogRow[]> => {
  const { rows } = await db.query<{ id: string; stream: string; data: string; node_id: string | null }>(
    `select l.id, l.stream, l.data, ${JOB_OF_ROW} as node_id
       ${ROWS_OF_RUN} limit $3`,
    [runId, afterId, limit],
  );
  return rows.map((r) => ({ id: Number(r.id), stream: r.stream, data: r.data, job: jobOf(r.node_id) }));
};

/** A log row's shape without its text: what a line index of the log needs (ingest/src/log-lines.ts). */
export interface LogRowShape {
  id: number;
  /** How many line feeds its text holds. */
  newlines: number;
  /** Its text ends with a line feed. */
  endsLine: boolean;
  /** Its text is empty. */
  empty: boolean;
  job: string | null;
}

/** The shapes of the run's log rows after `afterId`, in order, at most `limit`: the text stays in the database. */
export const readLogShapes = async (db: Db, runId: string, afterId: number, limit = 50_000): Promise<LogRowShape[]> => {
  const { rows } = await db.query<{ id: string; newlines: number; ends_line: boolean; empty: boolean; node_id: string | null }>(
    `select l.id, (length(l.data) - length(replace(l.data, E'\\n', '')))::int as newlines,
            right(l.data, 1) = E'\\n' as ends_line, l.data = '' as empty, ${JOB_OF_ROW} as node_id
       ${ROWS_OF_RUN} limit $3`,
    [runId, afterId, limit],
  );
  return rows.map((r) => ({ id: Number(r.id), newlines: r.newlines, endsLine: r.ends_line, empty: r.empty, job: jobOf(r.node_id) }));
};
