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

/** The tick's run: waits (on rows, not CLI calls) until the schedule fired past `previous` and that run ended. */
const nextRun = async (previous: string | null): Promise<{ run: string; status: string }> => {
  let found = { run: "", status: "" };
  await waitFor("the schedule's run to end", async () => {
    const { rows } = await db.query<{ run: string; status: string }>(
      `select r.id as run, r.status from schedules s join runs r on r.id = s.last_run_id where s.name = 'nightly'`,
    );
    found = rows[0] ?? found;
    return found.run !== "" && found.run !== previous && ["succeeded", "failed", "cancelled"].includes(found.status);
  });
  return found;
};

const scheduleRows = async (): Promise<Array<{ paused: boolean; next_fire_at: Date | null }>> =>
  (await db.query<{ paused: boolean; next_fire_at: Date | null }>(`select paused, next_fire_at from schedules`)).rows;

const ticks = async (): Promise<number> =>
  (await db.query<{ n: number }>(`select count(*)::int as n from events where type = 'schedule.tick'`)).rows[0]!.n;

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
  await db.query(`update schedules set next_fire_at = now() - interval '1 second' where name = 'nightly'`);
  const first = await nextRun(null);
  assert.equal(first.status, "succeeded");
  const view = JSON.parse(ok(await server.cli(["status", first.run, "-o", "json"])).stdout) as {
    output: Record<string, string>;
    tags: string[];
  };
  assert.deepEqual([view.output["schedule"], view.output["trigger"]], [s.id, "schedule.tick"]);
  assert.match(view.output["scheduled_at"] ?? "", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/, "the envelope in FLOW_INPUT_FILE");
  assert.ok(view.tags.includes("schedule:nightly"));
  assert.equal(await ticks(), 1);

  // Down over two ticks: killed, its next tick moved 2.5 minutes back, restarted.
  await server.kill("SIGKILL");
  await db.query(`update schedules set next_fire_at = now() - interval '150 seconds' where name = 'nightly'`);
  await server.restart();
  const second = await nextRun(first.run);
  assert.equal(second.status, "succeeded");
  const { rows } = await db.query<{ ahead: boolean }>(`select next_fire_at > now() as ahead from schedules where name = 'nightly'`);
  assert.equal(rows[0]?.ahead, true, "the next tick is the first match after the restart");
  assert.equal(await ticks(), 2, "two missed ticks fired once");
  const runs = await db.query(`select 1 from runs where 'schedule:nightly' = any(tags)`);
  assert.equal(runs.rowCount, 2);

  // Pause, resume and remove through the CLI.
  assert.match(ok(await server.cli(["schedule", "pause", "nightly"])).stderr, /schedule nightly paused/);
  assert.deepEqual(await scheduleRows(), [{ paused: true, next_fire_at: null }]);
  assert.match(ok(await server.cli(["schedule", "resume", "nightly"])).stderr, /schedule nightly resumed: next run /);
  ok(await server.cli(["schedule", "rm", "nightly"]));
  assert.deepEqual(await scheduleRows(), []);
  const gone = await server.cli(["schedule", "pause", "nightly"]);
  assert.match(gone.stderr, /^error: schedule nightly not found in default\/default/);
});
