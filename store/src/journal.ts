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
