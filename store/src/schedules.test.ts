/**
 * Schedules on a real Postgres (store/src/schedules.ts), with an injected clock: a due tick records
 * `schedule.tick`, submits the run and moves next_fire_at past now in one transaction; missed ticks
 * fire once; two controllers racing never fire one tick twice.
 */
import { afterEach, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { parseSchedule } from "@flowsvc/core";
import { createPool } from "./pool.js";
import { createTestDatabase, createTestProject, type TestDatabase } from "./testing.js";
import { fireDueSchedules, getSchedule, setSchedulePaused, upsertSchedule } from "./schedules.js";

// A database per test: firing is across every project, so one test's due schedule must not fire in another's.
let db: TestDatabase;
beforeEach(async () => {
  db = await createTestDatabase();
});
afterEach(async () => db?.drop());

const T0 = new Date("2026-06-01T10:00:30Z");
const minutes = (n: number): Date => new Date(T0.getTime() + n * 60_000);

const setSchedule = async (projectId: string, name: string, cron = "* * * * *", now = T0) =>
  (
    await upsertSchedule(db.pool, projectId, {
      ...parseSchedule(name, { cron, reaction: { kind: "script", source: 'echo "$CI_TRIGGER_SCHEDULE"\n', filename: "tick.sh" } }, now),
      createdBy: null,
    })
  ).schedule;

const countOf = async (sql: string, params: unknown[]): Promise<number> =>
  Number((await db.pool.query<{ n: string }>(`select count(*) as n from (${sql}) q`, params)).rows[0]!.n);

test("a schedule down over three ticks fires once at now: the tick event, the run, the next fire after now", async () => {
  const { projectId } = await createTestProject(db.pool);
  await db.pool.query(
    `insert into handlers (project_id, name, patterns, reaction) values ($1, 'watcher', '{schedule.tick}', '{"kind":"script","source":"true","filename":"w.sh"}')`,
    [projectId],
  );
  const s = await setSchedule(projectId, "every-minute");
  assert.equal(s.next_fire_at, "2026-06-01T10:01:00.000Z", "the first match after the set");
  assert.deepEqual((await fireDueSchedules(db.pool, T0)).fired, [], "nothing is due before its time");

  const now = minutes(3.2); // 10:03:42: the 10:01, 10:02 and 10:03 ticks were missed
  const { fired } = await fireDueSchedules(db.pool, now);
  assert.equal(fired.length, 1, "missed ticks fire once, not once each");
  const tick = fired[0]!;
  assert.equal(tick.scheduledAt.toISOString(), "2026-06-01T10:01:00.000Z");
  assert.equal(tick.nextFireAt?.toISOString(), "2026-06-01T10:04:00.000Z", "the first match after now");
  assert.deepEqual((await fireDueSchedules(db.pool, now)).fired, [], "the same now fires nothing more");

  const { rows: runs } = await db.pool.query<{ trigger: Record<string, unknown>; event_id: string; tags: string[]; trusted: boolean }>(
    `select trigger, event_id, tags, trusted from runs where id = $1`,
    [tick.runId],
  );
  assert.deepEqual(runs[0]!.trigger, { type: "schedule.tick", event: tick.eventId, schedule: s.id });
  assert.equal(runs[0]!.event_id, tick.eventId, "the run reads the tick's envelope from FLOW_INPUT_FILE");
  assert.deepEqual([runs[0]!.tags, runs[0]!.trusted], [["schedule:every-minute"], true]);
  const { rows: events } = await db.pool.query<{ type: string; fields: unknown; payload: unknown }>(
    `select type, fields, payload from events where id = $1`,
    [tick.eventId],
  );
  assert.deepEqual(events[0], {
    type: "schedule.tick",
    fields: { schedule: s.id },
    payload: { schedule_id: s.id, name: "every-minute", scheduled_at: "2026-06-01T10:01:00.000Z", run_id: tick.runId },
  });
  const { rows: handlerRuns } = await db.pool.query<{ trigger: Record<string, unknown> }>(
    `select trigger from runs where project_id = $1 and handler_name = 'watcher'`,
    [projectId],
  );
  assert.deepEqual(handlerRuns[0]?.trigger, { type: "schedule.tick", event: tick.eventId, schedule: s.id }, "a handler sees the tick");
  const after = await getSchedule(db.pool, projectId, "every-minute");
  assert.deepEqual([after?.last_fired_at, after?.last_run_id], [now.toISOString(), tick.runId]);
});

test("pause stops ticks; resume waits for the first match after now, without making up missed ones", async () => {
  const { projectId } = await createTestProject(db.pool);
  await setSchedule(projectId, "p");
  const paused = await setSchedulePaused(db.pool, { projectId, name: "p", paused: true, now: T0 });
  assert.deepEqual([paused?.paused, paused?.next_fire_at], [true, null]);
  assert.deepEqual((await fireDueSchedules(db.pool, minutes(10))).fired, []);
  const resumed = await setSchedulePaused(db.pool, { projectId, name: "p", paused: false, now: minutes(10) });
  assert.equal(resumed?.next_fire_at, "2026-06-01T10:11:00.000Z");
  assert.equal(await setSchedulePaused(db.pool, { projectId, name: "nope", paused: true, now: T0 }), undefined);
});

test("a replace keeps the id and the tick it waits for; a new cron waits for its own first match", async () => {
  const { projectId } = await createTestProject(db.pool);
  const first = await setSchedule(projectId, "r", "0 * * * *");
  const same = await setSchedule(projectId, "r", "0 * * * *", minutes(70));
  assert.deepEqual([same.id, same.next_fire_at], [first.id, first.next_fire_at]);
  const changed = await setSchedule(projectId, "r", "*/5 * * * *", minutes(70));
  assert.deepEqual([changed.id, changed.next_fire_at], [first.id, "2026-06-01T11:15:00.000Z"]);
});

test("two controllers racing over the same due ticks fire each tick exactly once", async () => {
  const { projectId } = await createTestProject(db.pool);
  const names = Array.from({ length: 12 }, (_v, i) => `race-${i}`);
  for (const name of names) await setSchedule(projectId, name);
  // Two controllers: two pools, as two processes would have (createPool: an idle connection the
  // database drop ends after the test must not crash the process).
  const pools = [createPool(db.url, { max: 2 }), createPool(db.url, { max: 2 })];
  try {
    let total = 0;
    for (let round = 1; round <= 5; round++) {
      const now = minutes(round);
      const [a, b] = await Promise.all(pools.map(async (p) => (await fireDueSchedules(p, now)).fired));
      assert.equal(a!.length + b!.length, names.length, `round ${round}: every due schedule fired once between the two`);
      total += a!.length + b!.length;
    }
    const ticks = await countOf(`select 1 from events where project_id = $1 and type = 'schedule.tick'`, [projectId]);
    const runs = await countOf(`select 1 from runs where project_id = $1`, [projectId]);
    const distinct = await countOf(`select distinct fields->>'schedule', payload->>'scheduled_at' from events where project_id = $1`, [
      projectId,
    ]);
    assert.deepEqual([ticks, runs, distinct], [total, total, total], "one event and one run per (schedule, tick)");
  } finally {
    await Promise.all(pools.map((p) => p.end()));
  }
});

test("a schedule whose tick fails is rolled back and reported; the others still fire", async () => {
  const { projectId } = await createTestProject(db.pool);
  await setSchedule(projectId, "a-broken");
  await setSchedule(projectId, "b-fine");
  // A zone this server no longer knows (a row from an older ICU, say): computing its next fire throws.
  await db.pool.query(`update schedules set time_zone = 'Mars/Olympus' where name = 'a-broken'`);
  const { fired, failed } = await fireDueSchedules(db.pool, minutes(1));
  assert.deepEqual(
    fired.map((f) => f.name),
    ["b-fine"],
  );
  assert.equal(failed.length, 1);
  assert.match(String(failed[0]!.err), /Mars\/Olympus/);
  const ticks = await countOf(`select 1 from events where project_id = $1 and payload->>'name' = 'a-broken'`, [projectId]);
  const broken = await getSchedule(db.pool, projectId, "a-broken");
  assert.deepEqual([ticks, broken?.last_run_id, broken?.next_fire_at], [0, null, "2026-06-01T10:01:00.000Z"], "nothing half-written");
});
