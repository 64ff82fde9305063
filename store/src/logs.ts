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

/** A pipeline run's rows carry their job (the job row's node, which outlives the node's settled attempt). */
const PIPED = `r.workflow = '${PIPELINE_WORKFLOW}'`;
const JOB_OF_ROW = `case when ${PIPED} then j.node_id end`;
const ROWS_OF_RUN = `from run_logs l join runs r on r.id = l.run_id
       left join jobs j on j.id = l.job_id
      where l.run_id = $1 and l.id > $2 order by l.id`;
/** A pipeline job's node id without its `--stepN` suffix. */
const jobOf = (nodeId: string | null): string | null => (nodeId === null ? null : nodeId.replace(/--step\d+$/, ""));

/**
 * The run's log after `afterId`. A pipeline run's rows (workflow `flowsvc/pipeline/v1`) carry the
 * job of the node whose agent job wrote them (the job row's `node_id`: a node's `job_id` is cleared
 * when its attempt settles, so a log read after the job ended would lose its prefix).
 */
export const readLogs = async (db: Db, runId: string, afterId: number, limit = 1000): Promise<LogRow[]> => {
  const { rows } = await db.query<{ id: string; stream: string; data: string; node_id: string | null }>(
    `select l.id, l.stream, l.data, ${JOB_OF_ROW} as node_id
       ${ROWS_OF_RUN} limit $3`,
    [runId, afterId, limit],
  );
  return rows.map((r) => ({ id: Number(r.id), stream: r.stream, data: r.data, job: jobOf(r.node_id) }));
};

/**
 * The shape of consecutive log rows without their text: what a line index of the log needs
 * (ingest/src/log-lines.ts). A pipeline run's rows come one by one (each has its job).
 */
export interface LogRowShape {
  /** The first row's id. */
  id: number;
  /** The last row's id. */
  lastId: number;
  /** How many rows. */
  rows: number;
  /** How many line feeds their text holds. */
  newlines: number;
  /** The last row with text ends with a line feed. */
  endsLine: boolean;
  /** All their text is empty. */
  empty: boolean;
  job: string | null;
}

/** Rows merged into one shape (not a pipeline run's): at most 32, starting within 64 Ki characters of text. */
const SHAPE_ROWS = 32;
const SHAPE_TEXT = 64 * 1024;

/**
 * The shapes of the run's log rows after `afterId`, in order, of at most `limit` rows: the text
 * stays in the database, and short rows come merged (SHAPE_ROWS, SHAPE_TEXT), so a log of 100k
 * short rows is 3k shapes while a window of lines still reads little more than its own text.
 */
export const readLogShapes = async (db: Db, runId: string, afterId: number, limit = 50_000): Promise<LogRowShape[]> => {
  const { rows } = await db.query<{
    id: string;
    last_id: string;
    rows: number;
    newlines: number;
    ends_line: boolean | null;
    empty: boolean;
    node_id: string | null;
  }>(
    `with shapes as (
       select l.id, (length(l.data) - length(replace(l.data, E'\\n', '')))::int as newlines,
              right(l.data, 1) = E'\\n' as ends_line, l.data = '' as empty, ${JOB_OF_ROW} as node_id,
              ${PIPED} as piped,
              row_number() over (order by l.id) - 1 as n,
              sum(length(l.data)) over (order by l.id) - length(l.data) as text_before
         ${ROWS_OF_RUN} limit $3)
     select min(id) as id, max(id) as last_id, count(*)::int as rows, sum(newlines)::int as newlines,
            (array_agg(ends_line order by id desc) filter (where not empty))[1] as ends_line,
            bool_and(empty) as empty, min(node_id) as node_id
       from shapes
      group by case when piped then n else n / $4 end, case when piped then 0 else text_before / $5 end
      order by min(id)`,
    [runId, afterId, limit, SHAPE_ROWS, SHAPE_TEXT],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    lastId: Number(r.last_id),
    rows: r.rows,
    newlines: r.newlines,
    endsLine: r.ends_line === true,
    empty: r.empty,
    job: jobOf(r.node_id),
  }));
};
