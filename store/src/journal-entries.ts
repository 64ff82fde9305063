import type { PoolClient } from "pg";
import { decideWait, type JournalEntry } from "@flowsvc/core";

/** A journal row as the wait engine needs it (deadline and args included). */
export interface WaitEntry extends JournalEntry {
  deadline: Date | null;
  args: Record<string, unknown> | null;
}

const COLUMNS = "position, kind, name, ordinal, status, result, deadline, args";

/**
 * `pending`, for statements that look up a run's pending entries to pass as a parameter
 * (`status = $n`) rather than write in their text. The partial indexes on pending entries
 * (journal_pending_waits, journal_pending_deadline) cover every run: a generic plan made while the
 * journal is small (a new server's connections keep theirs) chose them for `run_id = $1 and
 * status = 'pending'` and read every parked run's entries per call. A partial index's predicate
 * cannot be proven from a parameter, so a generic plan can only take the run's entries by primary
 * key (generic-plans.test.ts); a custom plan sees the value and is free to choose.
 */
export const PENDING = "pending";

export const getEntryForUpdate = async (tx: PoolClient, runId: string, position: number): Promise<WaitEntry | undefined> => {
  const { rows } = await tx.query<WaitEntry>(`select ${COLUMNS} from journal where run_id = $1 and position = $2 for update`, [
    runId,
    position,
  ]);
  return rows[0];
};

/** A new entry: resolved at once (`done` with its result) or `pending`, with its deadline (ms from now) and args. */
export interface NewEntry {
  status: "pending" | "done";
  result?: unknown;
  deadlineMs?: number | undefined;
  args?: unknown;
}

export const insertEntry = async (
  tx: PoolClient,
  runId: string,
  e: { position: number; kind: string; name: string; ordinal: number },
  entry: NewEntry,
): Promise<WaitEntry> => {
  const { rows } = await tx.query<WaitEntry>(
    `insert into journal (run_id, position, kind, name, ordinal, status, result, resolved_at, deadline, args)
     values ($1, $2, $3, $4, $5, $6, $7, case when $6 = 'done' then now() end,
             case when $8::bigint is null then null else now() + ($8::bigint * interval '1 millisecond') end, $9)
     returning ${COLUMNS}`,
    [
      runId,
      e.position,
      e.kind,
      e.name,
      e.ordinal,
      entry.status,
      JSON.stringify(entry.result ?? null),
      entry.deadlineMs ?? null,
      entry.args === undefined ? null : JSON.stringify(entry.args),
    ],
  );
  return rows[0]!;
};

export const resolveEntry = async (tx: PoolClient, runId: string, position: number, result: unknown): Promise<WaitEntry> => {
  const { rows } = await tx.query<WaitEntry>(
    `update journal set status = 'done', result = $3, resolved_at = now() where run_id = $1 and position = $2 returning ${COLUMNS}`,
    [runId, position, JSON.stringify(result ?? null)],
  );
  return rows[0]!;
};

/** Pending entries of a run of the given kinds (and name), oldest position first. */
export const pendingEntries = async (tx: PoolClient, runId: string, kinds: readonly string[], name?: string): Promise<WaitEntry[]> => {
  const { rows } = await tx.query<WaitEntry>(
    `select ${COLUMNS} from journal where run_id = $1 and status = $4 and kind = any($2::text[]) and ($3::text is null or name = $3)
      order by position for update`,
    [runId, kinds, name ?? null, PENDING],
  );
  return rows;
};

/**
 * Applies core's wait rule (decideWait) to a pending entry: resolves it when it is answered (by
 * `arrived`, a signal the caller took) or expired, else leaves it pending. `expire: false` keeps
 * it from timing out (a delivery only hands out signals; the timer loop times waits out).
 */
export const settleWait = async (
  tx: PoolClient,
  runId: string,
  e: WaitEntry,
  how: { fresh?: boolean; arrived?: { payload: unknown } | undefined; expire?: boolean } = {},
): Promise<WaitEntry> => {
  const deadlineMs = how.expire === false ? null : (e.deadline?.getTime() ?? null);
  const answer = decideWait({ kind: e.kind, deadlineMs, fresh: how.fresh ?? false, arrived: how.arrived }, Date.now());
  return answer.state === "pending" ? e : resolveEntry(tx, runId, e.position, answer.result);
};
