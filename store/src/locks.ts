import type { PoolClient } from "pg";
import { decideLease, grantsAtOnce, leaseToRelease, TERMINAL_STATUSES_SQL } from "@flowsvc/core";
import { resolveEntry } from "./journal-entries.js";
import { wakeRun } from "./wake.js";

/**
 * Project-scoped leases, granted FIFO. A lease request is a row; the oldest open request of a
 * group is granted when no request of the group holds the lease. A run that already holds a
 * group's lease is granted again at once (re-entrant), rather than waiting for itself. Who is
 * granted and which lease a release lets go are core's locks.ts decisions; the SQL here
 * serialises the group and writes the rows.
 */
/**
 * Requests and grants of one group are serialised with a transaction-scoped advisory lock: two
 * requests in flight cannot see each other's uncommitted rows, and both would be granted.
 */
const lockGroup = async (tx: PoolClient, projectId: string, grp: string): Promise<void> => {
  await tx.query(`select pg_advisory_xact_lock(hashtextextended($1, 7))`, [`${projectId}\u001f${grp}`]);
};

/** A run's request for a group's lease, made by its lock call at `position`. */
export interface LeaseRequestRow {
  projectId: string;
  grp: string;
  runId: string;
  position: number;
}

export const requestLease = async (tx: PoolClient, { projectId, grp, runId, position }: LeaseRequestRow): Promise<void> => {
  await lockGroup(tx, projectId, grp);
  const held = await tx.query(
    `select 1 from lock_leases where project_id = $1 and grp = $2 and run_id = $3 and granted_at is not null and released_at is null`,
    [projectId, grp, runId],
  );
  await tx.query(
    `insert into lock_leases (project_id, grp, run_id, position, granted_at) values ($1, $2, $3, $4, case when $5 then now() end)
     on conflict (run_id, position) do nothing`,
    [projectId, grp, runId, position, grantsAtOnce((held.rowCount ?? 0) > 0)],
  );
};

export const leaseGranted = async (tx: PoolClient, runId: string, position: number): Promise<string | undefined> => {
  const { rows } = await tx.query<{ granted_at: Date | null }>(`select granted_at from lock_leases where run_id = $1 and position = $2`, [
    runId,
    position,
  ]);
  return rows[0]?.granted_at?.toISOString();
};

/**
 * Grants the group's lease to the oldest waiting request if nobody holds it, resolving that
 * run's lock call and waking it (unless it is `self`, whose caller answers it directly).
 */
export const grantNext = async (tx: PoolClient, projectId: string, grp: string, self?: string): Promise<void> => {
  await lockGroup(tx, projectId, grp);
  const { rows } = await tx.query<{ id: string; run_id: string; position: number; granted_at: Date | null }>(
    `select id, run_id, position, granted_at from lock_leases where project_id = $1 and grp = $2 and released_at is null order by id for update`,
    [projectId, grp],
  );
  const next = decideLease(rows.map((r) => ({ ...r, granted: r.granted_at !== null }))).grant;
  if (!next) return;
  const { rows: granted } = await tx.query<{ granted_at: Date }>(
    `update lock_leases set granted_at = now() where id = $1 returning granted_at`,
    [next.id],
  );
  if (next.run_id === self) return;
  await resolveEntry(tx, next.run_id, next.position, { granted_at: granted[0]!.granted_at.toISOString() });
  await wakeRun(tx, next.run_id);
};

/** Bracketed lock: releases this run's newest held lease of the group and grants the next. */
export const releaseLease = async (tx: PoolClient, projectId: string, grp: string, runId: string): Promise<void> => {
  const { rows: held } = await tx.query<{ id: string }>(
    `select id from lock_leases where run_id = $1 and grp = $2 and granted_at is not null and (released_at is null) is true order by id for update`,
    // `(released_at is null) is true`: the same test, in a form no index's predicate is proven from,
    // so the run's leases are read by run_id (lock_leases_run_id_position_key). As `released_at is
    // null`, the generic plan made while lock_leases is small (a new server's connections keep it)
    // read every open lease of every run through lock_leases_open (generic-plans.test.ts).
    [runId, grp],
  );
  const release = leaseToRelease(held);
  if (release) await tx.query(`update lock_leases set released_at = now() where id = $1`, [release.id]);
  await grantNext(tx, projectId, grp);
};

/** A terminal run (or a retried attempt) lets go of everything it held or waited for. */
export const releaseRunLeases = async (tx: PoolClient, runId: string): Promise<void> => {
  const { rows } = await tx.query<{ project_id: string; grp: string }>(
    `update lock_leases set released_at = now() where run_id = $1 and (released_at is null) is true returning project_id, grp`,
    // `(released_at is null) is true`: the same test, in a form no index's predicate is proven from,
    // so the run's leases are read by run_id (lock_leases_run_id_position_key). As `released_at is
    // null`, the generic plan made while lock_leases is small (a new server's connections keep it)
    // read every open lease of every run through lock_leases_open (generic-plans.test.ts).
    [runId],
  );
  const groups = new Map(rows.map((r) => [`${r.project_id}\u001f${r.grp}`, r]));
  for (const g of groups.values()) await grantNext(tx, g.project_id, g.grp);
};

/** The lease position of a run's workflow-level concurrency group (`flow lock` calls use journal positions, 0 and up). */
export const RUN_GROUP_POSITION = -1;

/** The lease position of a pipeline's i-th job-level group (`runs.job_groups` order): -2, -3, ... */
export const jobGroupPosition = (index: number): number => -2 - index;

/**
 * A pipeline's `concurrency {group, policy}` (issue 11), workflow level (at RUN_GROUP_POSITION, in
 * the run's creating transaction) or job level (at jobGroupPosition, when the job is ready), on the
 * same lease table and FIFO as `flow lock`: the run requests the group's lease; with
 * `cancel-running` every other run holding or waiting for the group through a concurrency group
 * (a negative position: never a script's `flow lock`) is cancelled first (its leases are released
 * as it ends), so the newest is granted. Answers whether the lease is granted now; a run (or job)
 * not granted waits until a release grants it and wakes it (`wakeRun` nudges the graph driver).
 */
export const joinRunGroup = async (
  tx: PoolClient,
  g: {
    projectId: string;
    runId: string;
    grp: string;
    cancelRunning: boolean;
    cancel: (runId: string) => Promise<void>;
    /** Default RUN_GROUP_POSITION. */
    position?: number;
  },
): Promise<boolean> => {
  const position = g.position ?? RUN_GROUP_POSITION;
  await lockGroup(tx, g.projectId, g.grp);
  if (g.cancelRunning) {
    const { rows } = await tx.query<{ run_id: string }>(
      `select distinct l.run_id from lock_leases l join runs r on r.id = l.run_id
        where l.project_id = $1 and l.grp = $2 and l.position < 0 and l.released_at is null and l.run_id <> $3
          and r.status not in (${TERMINAL_STATUSES_SQL})
        order by l.run_id`,
      [g.projectId, g.grp, g.runId],
    );
    for (const r of rows) await g.cancel(r.run_id);
  }
  await requestLease(tx, { projectId: g.projectId, grp: g.grp, runId: g.runId, position });
  await grantNext(tx, g.projectId, g.grp, g.runId);
  return (await leaseGranted(tx, g.runId, position)) !== undefined;
};

/** Where the run's lease request at a position stands: never made, waiting, held, or released. */
export type LeaseState = "none" | "waiting" | "held" | "released";

/** The run's lease request at a position: its state, and its group (null when never made). */
export const leaseAt = async (tx: PoolClient, runId: string, position: number): Promise<{ state: LeaseState; grp: string | null }> => {
  const { rows } = await tx.query<{ grp: string; granted: boolean; released: boolean }>(
    `select grp, granted_at is not null as granted, released_at is not null as released from lock_leases where run_id = $1 and position = $2`,
    [runId, position],
  );
  const r = rows[0];
  if (!r) return { state: "none", grp: null };
  return { state: r.released ? "released" : r.granted ? "held" : "waiting", grp: r.grp };
};

/** Whether the run waits for its workflow-level concurrency group's lease (the graph driver holds it queued). */
export const awaitsRunGroup = async (tx: PoolClient, runId: string): Promise<boolean> =>
  (await leaseAt(tx, runId, RUN_GROUP_POSITION)).state === "waiting";

/** A job's group lets go when the job has ended: the run's lease at that position is released and the group's next is granted. */
export const releaseLeaseAt = async (tx: PoolClient, runId: string, position: number): Promise<void> => {
  const { rows } = await tx.query<{ project_id: string; grp: string }>(
    `update lock_leases set released_at = now() where run_id = $1 and position = $2 and released_at is null returning project_id, grp`,
    [runId, position],
  );
  if (rows[0]) await grantNext(tx, rows[0].project_id, rows[0].grp);
};
