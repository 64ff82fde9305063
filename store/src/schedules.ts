// Schedules (migration 012): the queries behind `flow schedule set|ls|show|rm|pause|resume`, and
// the firing of due ticks that the controller's timer loop calls (`fireDueSchedules`). The rules
// of a schedule and of cron are core's (core/src/resources/schedule.ts, core/src/cron.ts).
import { createHash } from "node:crypto";
import type { Pool, PoolClient } from "pg";
import { derivedId, nextFireAfter, trustOf, type ScheduleInput, type ScheduleRecord, type ScheduleScript } from "@flowsvc/core";
import { setRunCredentials } from "./credentials.js";
import { emitEvent } from "./emit.js";
import { mintId } from "./mint.js";
import { withTransaction } from "./pool.js";
import { createRun } from "./run-lifecycle.js";

type Db = Pool | PoolClient;

interface ScheduleRaw {
  id: string;
  name: string;
  cron: string;
  time_zone: string;
  paused: boolean;
  next_fire_at: Date | null;
  last_fired_at: Date | null;
  last_run_id: string | null;
  reaction: ScheduleScript;
  tags: string[];
  credentials: Record<string, string>;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `s.id, s.name, s.cron, s.time_zone, s.paused, s.next_fire_at, s.last_fired_at, s.last_run_id, s.reaction, s.tags,
  s.credentials, (select u.name from users u where u.id = s.created_by) as created_by, s.created_at, s.updated_at`;

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

const toRecord = (r: ScheduleRaw): ScheduleRecord => ({
  id: r.id,
  name: r.name,
  cron: r.cron,
  tz: r.time_zone,
  paused: r.paused,
  next_fire_at: r.paused ? null : iso(r.next_fire_at),
  last_fired_at: iso(r.last_fired_at),
  last_run_id: r.last_run_id,
  reaction: r.reaction,
  tags: r.tags,
  credentials: r.credentials,
  created_by: r.created_by,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

/**
 * Creates or replaces a schedule; `created` tells which. A replace keeps the schedule's id, its
 * paused state and, when the cron and zone are unchanged, the tick it is waiting for; a new cron
 * or zone waits for its own first match after the set.
 */
export const upsertSchedule = async (
  db: Db,
  projectId: string,
  s: ScheduleInput & { createdBy: string | null },
): Promise<{ schedule: ScheduleRecord; created: boolean }> => {
  const { rows } = await db.query<{ id: string; created: boolean }>(
    `insert into schedules as s (id, project_id, name, cron, time_zone, reaction, tags, credentials, next_fire_at, created_by)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     on conflict (project_id, name) do update
       set next_fire_at = case when s.cron = excluded.cron and s.time_zone = excluded.time_zone and s.next_fire_at is not null
                               then s.next_fire_at else excluded.next_fire_at end,
           cron = excluded.cron, time_zone = excluded.time_zone, reaction = excluded.reaction, tags = excluded.tags,
           credentials = excluded.credentials, updated_at = now()
     returning s.id, (xmax = 0) as created`,
    [
      mintId("sch"),
      projectId,
      s.name,
      s.cron,
      s.timeZone,
      JSON.stringify(s.reaction),
      s.tags,
      JSON.stringify(s.credentials),
      s.nextFireAt,
      s.createdBy,
    ],
  );
  const row = rows[0]!;
  return { schedule: (await getSchedule(db, projectId, s.name))!, created: row.created };
};

export const listSchedules = async (db: Db, projectId: string): Promise<ScheduleRecord[]> => {
  const { rows } = await db.query<ScheduleRaw>(`select ${COLUMNS} from schedules s where s.project_id = $1 order by s.name`, [projectId]);
  return rows.map(toRecord);
};

export const getSchedule = async (db: Db, projectId: string, name: string): Promise<ScheduleRecord | undefined> => {
  const { rows } = await db.query<ScheduleRaw>(`select ${COLUMNS} from schedules s where s.project_id = $1 and s.name = $2`, [
    projectId,
    name,
  ]);
  return rows[0] ? toRecord(rows[0]) : undefined;
};

/** False when there was no such schedule. Runs it already started go on. */
export const deleteSchedule = async (db: Db, projectId: string, name: string): Promise<boolean> => {
  const { rowCount } = await db.query(`delete from schedules where project_id = $1 and name = $2`, [projectId, name]);
  return (rowCount ?? 0) > 0;
};

/**
 * Pauses a schedule (no tick fires), or resumes it: the ticks it missed while paused are not made
 * up; it waits for the first match after `now`. Undefined when there is no such schedule. A
 * schedule already in the asked state is left as it is.
 */
export const setSchedulePaused = async (
  pool: Pool,
  { projectId, name, paused, now }: { projectId: string; name: string; paused: boolean; now: Date },
): Promise<ScheduleRecord | undefined> =>
  withTransaction(pool, async (tx) => {
    const { rows } = await tx.query<{ paused: boolean; cron: string; time_zone: string }>(
      `select paused, cron, time_zone from schedules where project_id = $1 and name = $2 for update`,
      [projectId, name],
    );
    const row = rows[0];
    if (!row) return undefined;
    if (row.paused !== paused) {
      const next = paused ? null : nextFireAfter(row.cron, row.time_zone, now);
      await tx.query(`update schedules set paused = $3, next_fire_at = $4, updated_at = now() where project_id = $1 and name = $2`, [
        projectId,
        name,
        paused,
        next,
      ]);
    }
    return getSchedule(tx, projectId, name);
  });

/** What one fired tick did. */
export interface FiredTick {
  scheduleId: string;
  projectId: string;
  name: string;
  /** The time the tick was due (the row's next_fire_at when it was claimed). */
  scheduledAt: Date;
  eventId: string;
  runId: string;
  /** The first match after `now`; null when the cron never matches again. */
  nextFireAt: Date | null;
}

interface DueRow {
  id: string;
  project_id: string;
  name: string;
  cron: string;
  time_zone: string;
  reaction: ScheduleScript;
  tags: string[];
  credentials: Record<string, string>;
  next_fire_at: Date;
  created_by: string | null;
}

/** A tick's run id derives from (schedule id, due time): the same tick can only ever make one run. */
export const scheduleRunId = (scheduleId: string, scheduledAt: Date): string =>
  derivedId("run", createHash("sha256").update(`${scheduleId}\u0000${scheduledAt.toISOString()}`).digest());

/**
 * Fires one due schedule, in the caller's transaction: the row is claimed with FOR UPDATE SKIP
 * LOCKED (a second controller skips it, and after this commits no longer finds it due), a
 * `schedule.tick` event is recorded on the bus (its handlers and waiters get it like any event), the
 * run of the script is created with that event as its trigger (CI_TRIGGER_EVENT=schedule.tick,
 * CI_TRIGGER_SCHEDULE=<id>, the envelope in FLOW_INPUT_FILE), and next_fire_at moves to the first
 * match after `now`: a server that was down over several ticks fires once, not once per tick.
 * Undefined when nothing is due.
 */
export const fireDueSchedule = async (
  tx: PoolClient,
  now: Date,
  pass: { skip?: readonly string[]; claimed?: { id?: string } } = {},
): Promise<FiredTick | undefined> => {
  const { rows } = await tx.query<DueRow>(
    `select id, project_id, name, cron, time_zone, reaction, tags, credentials, next_fire_at, created_by
       from schedules where not paused and next_fire_at <= $1 and not (id = any($2::text[]))
      order by next_fire_at limit 1 for update skip locked`,
    [now, pass.skip ?? []],
  );
  const s = rows[0];
  if (!s) return undefined;
  if (pass.claimed) pass.claimed.id = s.id;
  const runId = scheduleRunId(s.id, s.next_fire_at);
  // A schedule is set by a person (a member, through the user API): its ticks are that person's act.
  const trusted = trustOf({ by: "person" });
  const { eventId } = await emitEvent(tx, {
    projectId: s.project_id,
    type: "schedule.tick",
    key: null,
    payload: { schedule_id: s.id, name: s.name, scheduled_at: s.next_fire_at.toISOString(), run_id: runId },
    fields: { schedule: s.id },
    sourceRunId: null,
    trusted,
    platform: true,
  });
  await createRun(tx, {
    id: runId,
    projectId: s.project_id,
    source: s.reaction.source,
    filename: s.reaction.filename,
    interpreter: s.reaction.interpreter,
    tags: [...s.tags, `schedule:${s.name}`],
    trigger: { type: "schedule.tick", event: eventId, schedule: s.id },
    eventId,
    createdBy: s.created_by,
    trusted,
  });
  await setRunCredentials(tx, runId, s.credentials);
  const next = nextFireAfter(s.cron, s.time_zone, now);
  await tx.query(`update schedules set next_fire_at = $2, last_fired_at = $3, last_run_id = $4 where id = $1`, [s.id, next, now, runId]);
  return {
    scheduleId: s.id,
    projectId: s.project_id,
    name: s.name,
    scheduledAt: s.next_fire_at,
    eventId,
    runId,
    nextFireAt: next,
  };
};

/** How many ticks one pass fires at most; the rest wait for the next pass. */
export const TICKS_PER_PASS = 100;

export interface FiringPass {
  fired: FiredTick[];
  /** Schedules whose tick failed (rolled back: still due, tried again next pass); the others still fired. */
  failed: Array<{ scheduleId: string; err: unknown }>;
}

/**
 * Fires every schedule due at `now`, each in its own transaction (fireDueSchedule). One whose
 * firing fails is rolled back, reported and skipped for the rest of the pass, so it cannot hold up
 * the others; an error before any row was claimed (the database is gone) is thrown.
 */
export const fireDueSchedules = async (pool: Pool, now: Date, limit = TICKS_PER_PASS): Promise<FiringPass> => {
  const pass: FiringPass = { fired: [], failed: [] };
  const skip: string[] = [];
  while (pass.fired.length + pass.failed.length < limit) {
    const claimed: { id?: string } = {};
    try {
      const tick = await withTransaction(pool, (tx) => fireDueSchedule(tx, now, { skip, claimed }));
      if (!tick) break;
      pass.fired.push(tick);
    } catch (err) {
      if (claimed.id === undefined) throw err;
      skip.push(claimed.id);
      pass.failed.push({ scheduleId: claimed.id, err });
    }
  }
  return pass;
};
