import type { PoolClient } from "pg";
import type { JournalEntry } from "@flowsvc/core";

/** A journal row as the wait engine needs it (deadline and args included). */
export interface WaitEntry extends JournalEntry {
  deadline: Date | null;
  args: Record<string, unknown> | null;
}

const COLUMNS = "position, kind, name, ordinal, status, result, deadline, args";

export const getEntryForUpdate = async (tx: PoolClient, runId: string, position: number): Promise<WaitEntry | undefined> => {
  const { rows } = await tx.query<WaitEntry>(`select ${COLUMNS} from journal where run_id = $1 and position = $2 for update`, [runId, position]);
  return rows[0];
};

export const insertEntry = async (
  tx: PoolClient,
  runId: string,
  e: { position: number; kind: string; name: string; ordinal: number },
  status: "pending" | "done",
  result: unknown,
  opts: { deadlineMs?: number | undefined; args?: unknown } = {},
): Promise<WaitEntry> => {
  const { rows } = await tx.query<WaitEntry>(
    `insert into journal (run_id, position, kind, name, ordinal, status, result, resolved_at, deadline, args)
     values ($1, $2, $3, $4, $5, $6, $7, case when $6 = 'done' then now() end,
             case when $8::bigint is null then null else now() + ($8::bigint * interval '1 millisecond') end, $9)
     returning ${COLUMNS}`,
    [runId, e.position, e.kind, e.name, e.ordinal, status, JSON.stringify(result ?? null), opts.deadlineMs ?? null, opts.args === undefined ? null : JSON.stringify(opts.args)],
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
    `select ${COLUMNS} from journal where run_id = $1 and status = 'pending' and kind = any($2::text[]) and ($3::text is null or name = $3)
      order by position for update`,
    [runId, kinds, name ?? null],
  );
  return rows;
};

export const isDue = (e: WaitEntry): boolean => e.deadline !== null && e.deadline.getTime() <= Date.now();
