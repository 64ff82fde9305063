import type { Pool, PoolClient } from "pg";
import { isSameCall, type JournalEntry, type RecordRequest } from "@flowsvc/core";

type Db = Pool | PoolClient;

export const listJournal = async (db: Db, runId: string): Promise<JournalEntry[]> => {
  const { rows } = await db.query<JournalEntry>(
    `select position, kind, name, ordinal, status, result from journal where run_id = $1 order by position`,
    [runId],
  );
  return rows;
};

export type RecordOutcome = { type: "recorded" | "existing"; entry: JournalEntry } | { type: "mismatch"; entry: JournalEntry };

/**
 * Records a durable call at its position. Calls are identified by position, so a record retried
 * after a lost answer (server death, network) finds its own row and returns it unchanged: the
 * first write stands. A different call at a taken position is reported, never overwritten (the
 * caller refuses it with core's determinismError).
 */
export const recordJournal = async (db: Db, runId: string, entry: RecordRequest): Promise<RecordOutcome> => {
  const inserted = await db.query<JournalEntry>(
    `insert into journal (run_id, position, kind, name, ordinal, status, result, resolved_at)
     values ($1, $2, $3, $4, $5, $6, $7, case when $6 = 'done' then now() end)
     on conflict (run_id, position) do nothing
     returning position, kind, name, ordinal, status, result`,
    [runId, entry.position, entry.kind, entry.name, entry.ordinal, entry.status, JSON.stringify(entry.result ?? null)],
  );
  if (inserted.rows[0]) return { type: "recorded", entry: inserted.rows[0] };
  const { rows } = await db.query<JournalEntry>(
    `select position, kind, name, ordinal, status, result from journal where run_id = $1 and position = $2`,
    [runId, entry.position],
  );
  const existing = rows[0]!;
  return { type: isSameCall(existing, entry) ? "existing" : "mismatch", entry: existing };
};

/**
 * recordJournal in one round trip for the job behind a token, whose run the caller already knows:
 * the row is written only while that job is live (dispatched or running) and the position is
 * free. Nothing written answers undefined (the job is gone, or the position is taken: a retried
 * record or a determinism mismatch), and the caller asks again the long way (jobByToken, then
 * recordJournal), which tells the three apart. The entry written comes back without its result
 * (the caller has it: a step's stdout, up to 2 MiB sealed, is not sent back and parsed again).
 */
export const recordJournalForToken = async (
  db: Db,
  job: { readonly digest: Buffer; readonly runId: string },
  entry: RecordRequest,
): Promise<Omit<JournalEntry, "result"> | undefined> => {
  // The row written is the entry's own values: only whether one was written comes back (no row
  // description and row of five columns to parse on every `flow step`).
  const { rowCount } = await db.query(
    `insert into journal (run_id, position, kind, name, ordinal, status, result, resolved_at)
     select j.run_id, $3::int, $4::text, $5::text, $6::int, $7::text, $8::jsonb, case when $7::text = 'done' then now() end
       from jobs j where j.token_digest = $1 and j.run_id = $2 and j.status in ('dispatched', 'running')
     on conflict (run_id, position) do nothing`,
    [job.digest, job.runId, entry.position, entry.kind, entry.name, entry.ordinal, entry.status, JSON.stringify(entry.result ?? null)],
  );
  return rowCount === 1
    ? { position: entry.position, kind: entry.kind, name: entry.name, ordinal: entry.ordinal, status: entry.status }
    : undefined;
};
