import type { PoolClient } from "pg";
import { FlowError, isTerminalStatus } from "@flowsvc/core";
import { pendingEntries, settleWait, type WaitEntry } from "./journal-entries.js";
import { wakeRun } from "./wake.js";

/** Takes the oldest unclaimed signal of (run, name) for the wait at `position`, if one is queued. */
export const claimSignal = async (
  tx: PoolClient,
  runId: string,
  name: string,
  position: number,
): Promise<{ payload: unknown } | undefined> => {
  const { rows } = await tx.query<{ payload: unknown }>(
    `update signals set claimed_position = $3
      where id = (select id from signals where run_id = $1 and name = $2 and claimed_position is null order by id limit 1 for update)
      returning payload`,
    [runId, name, position],
  );
  return rows[0];
};

/**
 * A pending wait-signal: takes a queued signal (the claim is SQL's), then core's decideWait says
 * what it answers: the payload, a timeout once its deadline passed (unless `expire` is false), or
 * pending.
 */
export const evaluateSignalWait = async (tx: PoolClient, runId: string, e: WaitEntry, expire: boolean): Promise<WaitEntry> => {
  const arrived = await claimSignal(tx, runId, e.name, e.position);
  return settleWait(tx, runId, e, { arrived, expire });
};

/**
 * `flow signal`: queues the signal, and hands queued signals to the run's waiting calls in
 * position order (each wait draws one). A signal to a finished run is refused.
 */
export interface SentSignal {
  name: string;
  payload: unknown;
  sentBy: string;
}

export const deliverSignal = async (
  tx: PoolClient,
  runId: string,
  { name, payload, sentBy }: SentSignal,
): Promise<{ delivered: boolean }> => {
  const { rows } = await tx.query<{ status: string }>(`select status from runs where id = $1 for update`, [runId]);
  const status = rows[0]?.status;
  if (!status) throw new FlowError("not_found", `run ${runId} not found`);
  if (isTerminalStatus(status)) {
    throw new FlowError("conflict", `run ${runId} has ${status}; it takes no more signals`);
  }
  await tx.query(`insert into signals (run_id, name, payload, sent_by) values ($1, $2, $3, $4)`, [
    runId,
    name,
    JSON.stringify(payload ?? null),
    sentBy,
  ]);
  let delivered = false;
  for (const waiter of await pendingEntries(tx, runId, ["wait-signal"], name)) {
    const after = await evaluateSignalWait(tx, runId, waiter, false);
    if (after.status !== "done") break;
    delivered = true;
  }
  if (delivered) await wakeRun(tx, runId);
  return { delivered };
};

/** Policy retry: the signals the purged attempt took are queued again for the next one. */
export const releaseSignalClaims = async (tx: PoolClient, runId: string): Promise<void> => {
  await tx.query(`update signals set claimed_position = null where run_id = $1`, [runId]);
};
