/**
 * Schedules end to end (issue 11, item 3) with the real `flow` CLI and a real `flow server`: the
 * README's nightly example is set on a cron that fires every minute; its tick is made due by moving
 * next_fire_at into the past in the server's Postgres (no test waits a real minute); the run sees
 * CI_TRIGGER_EVENT=schedule.tick and CI_TRIGGER_SCHEDULE. Then the server is killed, two ticks pass
 * while it is down, and the restarted server runs the schedule once, not once per missed tick.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import pg from "pg";
import { REPO_ROOT, startTestServer, type TestServer } from "./support/server.js";
import { ok } from "./support/runs.js";
import { waitFor } from "./support/wait.js";

const NIGHTLY = join(REPO_ROOT, "examples", "schedules", "nightly.sh");

let server: TestServer;
let db: pg.Pool;
before(async () => {
  server = await startTestServer({ agents: 1 });
  db = new pg.Pool({ connectionString: server.databaseUrl, max: 2 });
  db.on("error", () => undefined); // an idle connection ended by the database's drop at the end
});
after(async () => {
  await db?.end();
  await server?.stop();
});

interface Listed {
  id: string;
  name: string;
  cron: string;
  tz: string;
  paused: boolean;
  next_fire_at: string | null;
  last_run_id: string | null;
}

const listed = async (): Promise<Listed[]> => JSON.parse(ok(await server.cli(["schedule", "ls", "-o", "json"])).stdout) as Listed[];

/**
 * Makes the schedule due `secondsAgo` seconds ago (moves next_fire_at in its row: no test waits for
 * the clock) and answers that due time. Truncated to milliseconds, as the tick's scheduled_at is.
 */
const makeDue = async (secondsAgo: number): Promise<Date> =>
  (
    await db.query<{ due: Date }>(
      `update schedules set next_fire_at = date_trunc('milliseconds', now()) - make_interval(secs => $1)
        where name = 'nightly' returning next_fire_at as due`,
      [secondsAgo],
    )
  ).rows[0]!.due;

/**
 * The run of the tick due at `due`, once it ended: found by the tick's scheduled_at, so a real
 * minute passing during the test (the cron fires every minute) cannot be mistaken for it.
 */
const runOfTick = async (due: Date): Promise<{ run: string; status: string }> => {
  let found = { run: "", status: "" };
  await waitFor(`the run of the tick due at ${due.toISOString()} to end`, async () => {
    const { rows } = await db.query<{ run: string; status: string }>(
      `select r.id as run, r.status from events e join runs r on r.id = e.payload->>'run_id'
        where e.type = 'schedule.tick' and e.payload->>'scheduled_at' = $1`,
      [due.toISOString()],
    );
    found = rows[0] ?? found;
    return ["succeeded", "failed", "cancelled"].includes(found.status);
  });
  return found;
};

const scheduleRows = async (): Promise<Array<{ paused: boolean; next_fire_at: Date | null }>> =>
  (await db.query<{ paused: boolean; next_fire_at: Date | null }>(`select paused, next_fire_at from schedules`)).rows;

/** The bus position now: ticks recorded later have a greater seq. */
const busSeq = async (): Promise<string> =>
  (await db.query<{ seq: string }>(`select coalesce(max(seq), 0)::text as seq from events`)).rows[0]!.seq;

/** Ticks recorded after bus position `after` whose due time is before `before`. */
const ticksSince = async (after: string, before: Date): Promise<number> =>
  (
    await db.query<{ n: number }>(
      `select count(*)::int as n from events
        where type = 'schedule.tick' and seq > $1::bigint and (payload->>'scheduled_at')::timestamptz < $2`,
      [after, before],
    )
  ).rows[0]!.n;

test("a schedule fires its run with CI_TRIGGER_SCHEDULE, and after a restart over two missed ticks fires once", async () => {
  const bad = await server.cli(["schedule", "set", "nightly", NIGHTLY, "--cron", "0 2 * 13 *"]);
  assert.equal(bad.code, 2, bad.stderr);
  assert.match(bad.stderr, /^error: cron: field 4 \(month\) "13" is not valid: it takes 1-12 or JAN-DEC/);
  const badZone = await server.cli(["schedule", "set", "nightly", NIGHTLY, "--cron", "* * * * *", "--tz", "Mars/Olympus"]);
  assert.match(badZone.stderr, /^error: tz: "Mars\/Olympus" is not a time zone this server knows/);
  assert.deepEqual(await scheduleRows(), [], "refused sets wrote nothing");

  const set = ok(await server.cli(["schedule", "set", "nightly", NIGHTLY, "--cron", "* * * * *", "--tz", "Europe/Berlin"]));
  assert.match(set.stderr, /schedule nightly created: \* \* \* \* \* \(Europe\/Berlin\), next run /);
  const [s] = await listed();
  assert.ok(s && s.next_fire_at && !s.paused && s.tz === "Europe/Berlin", JSON.stringify(s));
  const table = ok(await server.cli(["schedule", "ls"])).stdout;
  assert.match(table, /NAME\s+CRON\s+ZONE\s+NEXT\s+PAUSED/);

  // Due now: the tick is moved into the past instead of waiting for the minute.
  const due = await makeDue(1);
  const first = await runOfTick(due);
  assert.equal(first.status, "succeeded");
  const view = JSON.parse(ok(await server.cli(["status", first.run, "-o", "json"])).stdout) as {
    output: Record<string, string>;
    tags: string[];
  };
  assert.deepEqual([view.output["schedule"], view.output["trigger"]], [s.id, "schedule.tick"]);
  assert.equal(view.output["scheduled_at"], due.toISOString(), "the tick's envelope in FLOW_INPUT_FILE");
  assert.ok(view.tags.includes("schedule:nightly"));

  // Down over two ticks: killed, its pending tick moved 150 s back (the ticks 60 s and 120 s after
  // it were missed too), restarted.
  await server.kill("SIGKILL");
  const missed = await makeDue(150);
  const down = await busSeq();
  await server.restart();
  assert.equal((await runOfTick(missed)).status, "succeeded");
  // Any tick the restarted server fires later (the clock reaching the next minute) is due after the restart.
  const restartedBy = new Date(missed.getTime() + 150_000);
  assert.equal(await ticksSince(down, restartedBy), 1, "the ticks missed while it was down fired once, not once each");
  const { rows } = await db.query<{ ahead: boolean }>(
    `select next_fire_at >= $1::timestamptz + interval '150 seconds' as ahead from schedules where name = 'nightly'`,
    [missed],
  );
  assert.equal(rows[0]?.ahead, true, "the next tick is the first match after the restart");

  // Pause, resume and remove through the CLI.
  assert.match(ok(await server.cli(["schedule", "pause", "nightly"])).stderr, /schedule nightly paused/);
  assert.deepEqual(await scheduleRows(), [{ paused: true, next_fire_at: null }]);
  assert.match(ok(await server.cli(["schedule", "resume", "nightly"])).stderr, /schedule nightly resumed: next run /);
  ok(await server.cli(["schedule", "rm", "nightly"]));
  assert.deepEqual(await scheduleRows(), []);
  const gone = await server.cli(["schedule", "pause", "nightly"]);
  assert.match(gone.stderr, /^error: schedule nightly not found in default\/default/);
});
