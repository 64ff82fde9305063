/**
 * `flow call`'s wait (docs/internals.md, "In-script socket protocol"): a script's `call` entry is
 * pending until its child graph run ends. `completeRun` calls `resolveCallOfChild` in the child's
 * terminal transaction: the parent's entry gets the child's end and the parent is woken.
 */
import { isTerminalStatus } from "@flowsvc/core";
import type { PoolClient } from "pg";
import { PENDING, resolveEntry, type WaitEntry } from "./journal-entries.js";
import { wakeRun } from "./wake.js";

/** What a `call` entry records: the child's id and how it ended. */
export interface CallResult {
  run_id: string;
  status: string;
  output: unknown;
  error: string | null;
}

/** The child's end, or undefined while it runs. */
export const childEnd = async (tx: PoolClient, childRunId: string): Promise<CallResult | undefined> => {
  const { rows } = await tx.query<{ status: string; output: unknown; error: string | null }>(
    `select status, output, error from runs where id = $1`,
    [childRunId],
  );
  const r = rows[0];
  if (!r) return { run_id: childRunId, status: "failed", output: null, error: `child run ${childRunId} is gone` };
  return isTerminalStatus(r.status) ? { run_id: childRunId, status: r.status, output: r.output, error: r.error } : undefined;
};

/** A pending `call` entry of a parent: resolved when its child has ended. */
export const evaluateCall = async (tx: PoolClient, runId: string, e: WaitEntry): Promise<WaitEntry> => {
  const child = typeof e.args?.["child_run_id"] === "string" ? e.args["child_run_id"] : undefined;
  if (!child) return e;
  const end = await childEnd(tx, child);
  return end ? resolveEntry(tx, runId, e.position, end) : e;
};

/** The child ended (the caller's transaction): its parent's waiting `call` entry is resolved and the parent woken. */
export const resolveCallOfChild = async (tx: PoolClient, childRunId: string): Promise<void> => {
  const { rows } = await tx.query<{ run_id: string; position: number }>(
    `select j.run_id, j.position from runs c join journal j on j.run_id = c.parent_run_id
      where c.id = $1 and j.kind = 'call' and j.status = $2 and j.args ->> 'child_run_id' = $1 for update of j`,
    // `pending` as a parameter: the parent's entries by primary key, never every pending call (PENDING).
    [childRunId, PENDING],
  );
  const end = rows.length > 0 ? await childEnd(tx, childRunId) : undefined;
  if (!end) return;
  for (const r of rows) {
    await resolveEntry(tx, r.run_id, r.position, end);
    await wakeRun(tx, r.run_id);
  }
};
