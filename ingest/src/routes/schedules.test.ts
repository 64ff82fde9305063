/** The schedules plugin (routes/schedules.ts) over app.inject(): set, list, show, pause, resume, remove, and the refusals. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ask, assertCallerRefusals, assertError, countRows, createTestApp, deepJson, type TestApp } from "../testing/test-app.js";

let t: TestApp;
let schedules: string;
before(async () => {
  t = await createTestApp();
  schedules = `${t.project.base}/schedules`;
});
after(() => t.close());

const schedule = {
  cron: "0 2 * * *",
  tz: "Europe/Berlin",
  reaction: { kind: "script", source: "echo nightly\n", filename: "nightly.sh" },
};

interface Shown {
  id: string;
  name: string;
  cron: string;
  tz: string;
  paused: boolean;
  next_fire_at: string | null;
  created_by: string | null;
  reaction: { kind: string; filename: string; interpreter: string[]; size: number; source?: string };
  credentials: Record<string, string>;
}

const refusedSet = async (name: string, body: unknown, message: RegExp): Promise<void> => {
  const before = await countRows(t, "schedules");
  const res = await ask(t, "PUT", `${schedules}/${name}`, { body });
  assertError(res, 400, message, `set ${name} ${typeof body === "string" ? body.slice(0, 60) : JSON.stringify(body).slice(0, 60)}`);
  assert.equal(await countRows(t, "schedules"), before, "a refused set wrote nothing");
};

test("a member sets a schedule (201), replaces it (200); viewers list and show it; pause, resume, remove", async () => {
  const created = await ask(t, "PUT", `${schedules}/nightly`, { body: { ...schedule, credentials: { GH_TOKEN: "github" } } });
  assert.equal(created.status, 201, created.text);
  const c = created.body as Shown;
  assert.deepEqual(
    [c.cron, c.tz, c.paused, c.created_by, c.reaction.interpreter, c.reaction.source, c.credentials],
    ["0 2 * * *", "Europe/Berlin", false, "mo", ["bash", "-eu"], "echo nightly\n", { GH_TOKEN: "github" }],
  );
  assert.match(c.id, /^sch-[0-9a-z]{26}$/);
  assert.ok(c.next_fire_at && Date.parse(c.next_fire_at) > Date.now(), "the next fire is ahead");
  const replaced = await ask(t, "PUT", `${schedules}/nightly`, { body: { ...schedule, cron: "  0  3 * * * " } });
  assert.equal(replaced.status, 200, replaced.text);
  assert.deepEqual([(replaced.body as Shown).id, (replaced.body as Shown).cron], [c.id, "0 3 * * *"], "same id; cron normalised");

  const listed = (await ask(t, "GET", schedules, { as: "viewer" })).body as Shown[];
  assert.deepEqual(
    listed.map((s) => [s.name, s.reaction]),
    [["nightly", { kind: "script", filename: "nightly.sh", interpreter: ["bash", "-eu"], size: 13 }]],
    "the list has no source",
  );
  assert.equal(((await ask(t, "GET", `${schedules}/nightly`, { as: "viewer" })).body as Shown).reaction.source, "echo nightly\n");

  const paused = (await ask(t, "POST", `${schedules}/nightly/pause`)).body as Shown;
  assert.deepEqual([paused.paused, paused.next_fire_at], [true, null]);
  const resumed = (await ask(t, "POST", `${schedules}/nightly/resume`)).body as Shown;
  assert.equal(resumed.paused, false);
  assert.ok(resumed.next_fire_at);

  assert.equal((await ask(t, "DELETE", `${schedules}/nightly`)).status, 204);
  assertError(await ask(t, "GET", `${schedules}/nightly`, { as: "viewer" }), 404, /schedule nightly not found in/);
  assertError(await ask(t, "DELETE", `${schedules}/nightly`), 404, /schedule nightly not found in/);
  assertError(await ask(t, "POST", `${schedules}/nightly/pause`), 404, /schedule nightly not found in/);
});

test("schedule routes refuse callers: no token, a forged token, a viewer writing, a non-member", async () => {
  await ask(t, "PUT", `${schedules}/kept`, { body: schedule });
  await assertCallerRefusals(t, { method: "GET", url: schedules }, "viewer");
  await assertCallerRefusals(t, { method: "GET", url: `${schedules}/kept` }, "viewer");
  await assertCallerRefusals(t, { method: "PUT", url: `${schedules}/other`, body: schedule }, "member");
  await assertCallerRefusals(t, { method: "POST", url: `${schedules}/kept/pause` }, "member");
  await assertCallerRefusals(t, { method: "POST", url: `${schedules}/kept/resume` }, "member");
  await assertCallerRefusals(t, { method: "DELETE", url: `${schedules}/kept` }, "member");
  const kept = (await ask(t, "GET", `${schedules}/kept`, { as: "viewer" })).body as Shown;
  assert.equal(kept.paused, false, "the refused pause changed nothing");
  assert.equal(await countRows(t, "schedules"), 1, "the refused set and delete changed nothing");
  assertError(
    await ask(t, "GET", `${t.other.base}/schedules/kept`, { as: "outsider" }),
    404,
    new RegExp(`schedule kept not found in ${t.other.org}/p`),
  );
  assert.equal((await ask(t, "DELETE", `${schedules}/kept`)).status, 204);
});

test("a bad schedule is a 400 naming the field: cron (and which cron field), tz, reaction, credentials, name", async () => {
  const bad = await ask(t, "PUT", `${schedules}/s`, { body: { ...schedule, cron: "0 2 * 13 *" } });
  assertError(bad, 400, /^cron: field 4 \(month\) "13" is not valid: it takes 1-12 or JAN-DEC/);
  assert.deepEqual([bad.error?.details?.["field"], bad.error?.details?.["position"]], ["cron", 4]);
  await refusedSet("s", { ...schedule, cron: "61 * * * *" }, /^cron: field 1 \(minute\) "61"/);
  await refusedSet("s", { ...schedule, cron: "0 0 * * * *" }, /^cron: .* has 6 fields; a schedule takes exactly 5/);
  await refusedSet("s", { ...schedule, cron: "0 0 30 2 *" }, /^cron: "0 0 30 2 \*" never fires/);
  await refusedSet("s", { ...schedule, cron: "1e400 * * * *" }, /^cron: field 1 \(minute\) "1e400" is not valid/);
  await refusedSet("s", { ...schedule, tz: "Mars/Olympus" }, /^tz: "Mars\/Olympus" is not a time zone this server knows/);
  await refusedSet("s", { ...schedule, tz: "../../etc/localtime" }, /^tz: .* is not a time zone name/);
  await refusedSet("s", { ...schedule, cron: undefined }, /^cron: /);
  await refusedSet("s", { ...schedule, reaction: { ...schedule.reaction, kind: "yaml" } }, /^reaction\.kind: only "script" is available/);
  await refusedSet(
    "s",
    { ...schedule, reaction: { ...schedule.reaction, filename: "a/b.sh" } },
    /^reaction\.filename: filename must be a base name/,
  );
  await refusedSet("s", { ...schedule, reaction: { ...schedule.reaction, interpreter: [] } }, /^reaction\.interpreter: /);
  await refusedSet(
    "s",
    { ...schedule, credentials: { LD_PRELOAD: "github" } },
    /^credentials: LD_PRELOAD: credential variable "LD_PRELOAD" is refused/,
  );
  await refusedSet("-s", schedule, /^name: a schedule name is 1-64 of/);
  await refusedSet("s", { ...schedule, extra: true }, /extra/);
});

test("hostile schedules: NUL and lone surrogates, percent-encoding, deep nesting, 1e400", async () => {
  await refusedSet("s", { ...schedule, cron: "0 2 * * *\u0000" }, /^body\.cron holds a NUL character/);
  await refusedSet("s", { ...schedule, tz: "Europe/Berlin\ud800" }, /^body\.tz holds a lone UTF-16 surrogate/);
  await refusedSet("s%00", schedule, /^path parameter name holds a NUL character/);
  await refusedSet("s%C3%28", schedule, /not valid percent-encoding/);
  await refusedSet("s%2Fx", schedule, /^name: a schedule name is 1-64 of/);
  await refusedSet("s", `{"cron":"* * * * *","reaction":${deepJson(200)}}`, /is nested more than 128 levels deep/);
  await refusedSet(
    "s",
    `{"cron":1e400,"reaction":{"kind":"script","source":"x","filename":"x.sh"}}`,
    /^body\.cron is a number outside the range a JSON number can be stored in/,
  );
  await refusedSet("s", { ...schedule, cron: 5 }, /^cron: /);
  assertError(await ask(t, "POST", `${schedules}/${"s".repeat(101)}/pause`), 414, /over 100 characters/);
});
