// The cron wrapper (core/src/cron.ts): what a schedule accepts, the field a bad expression is
// refused at, time zones, and the next fire time around daylight saving changes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "./errors.js";
import { checkSchedule, nextFireAfter, parseCron, parseTimeZone } from "./cron.js";
import { parseSchedule } from "./resources/schedule.js";

const refused = (fn: () => unknown, message: RegExp, details?: Record<string, unknown>): void => {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof FlowError, String(err));
    assert.equal(err.code, "invalid_argument");
    assert.match(err.message, message);
    if (details) for (const [k, v] of Object.entries(details)) assert.equal(err.details?.[k], v, `details.${k}`);
    return true;
  });
};

test("five fields and the nicknames are accepted, whitespace normalised", () => {
  assert.equal(parseCron("  */5   *  * * MON-FRI "), "*/5 * * * MON-FRI");
  assert.equal(parseCron("0 2 1,15 JAN-JUN *"), "0 2 1,15 JAN-JUN *");
  assert.equal(parseCron("@Daily"), "@daily");
  assert.equal(parseCron("@midnight"), "@midnight");
});

test("a bad expression is refused naming the field, its text and what it takes", () => {
  refused(() => parseCron("61 * * * *"), /^cron: field 1 \(minute\) "61" is not valid: it takes 0-59/, { field: "cron", position: 1 });
  refused(() => parseCron("0 25 * * *"), /^cron: field 2 \(hour\) "25" is not valid: it takes 0-23/, { name: "hour" });
  refused(() => parseCron("0 0 32 * *"), /^cron: field 3 \(day of month\) "32"/);
  refused(() => parseCron("0 0 * 13 *"), /^cron: field 4 \(month\) "13" is not valid: it takes 1-12 or JAN-DEC/);
  refused(() => parseCron("0 0 * * 8"), /^cron: field 5 \(day of week\) "8"/);
  refused(() => parseCron("*/0 * * * *"), /^cron: field 1 \(minute\) "\*\/0"/);
  refused(() => parseCron("1e400 * * * *"), /^cron: field 1 \(minute\) "1e400" is not valid/);
  refused(() => parseCron("0 0 * * * *"), /^cron: "0 0 \* \* \* \*" has 6 fields; a schedule takes exactly 5/);
  refused(() => parseCron(""), /^cron: "" has 0 fields/);
  refused(() => parseCron("@nightly"), /^cron: "@nightly" is not a nickname cron knows/);
  refused(() => parseCron("0 0 * * *\u0000"), /^cron: field 5 \(day of week\)/);
  refused(() => parseCron("x".repeat(300)), /^cron: the expression is over 256 characters/);
  refused(() => checkSchedule("0 0 31 2 *", "UTC", new Date()), /^cron: "0 0 31 2 \*" never fires/);
});

test("a time zone is an IANA name Intl knows, kept in its canonical spelling", () => {
  assert.equal(parseTimeZone("Europe/Berlin"), "Europe/Berlin");
  assert.equal(parseTimeZone("UTC"), "UTC");
  refused(() => parseTimeZone("Mars/Olympus"), /^tz: "Mars\/Olympus" is not a time zone this server knows/, { field: "tz" });
  refused(() => parseTimeZone("Europe/Berlin\u0000"), /^tz: .* is not a time zone name/);
  refused(() => parseTimeZone("../../etc/passwd x"), /^tz: .* is not a time zone name/);
  refused(() => parseTimeZone(""), /^tz: "" is not a time zone name/);
});

test("the next fire time is strictly after now, read in the zone", () => {
  const at = new Date("2026-06-01T10:00:00Z");
  assert.equal(nextFireAfter("* * * * *", "UTC", at)?.toISOString(), "2026-06-01T10:01:00.000Z", "not now itself");
  assert.equal(nextFireAfter("0 2 * * *", "Europe/Berlin", at)?.toISOString(), "2026-06-02T00:00:00.000Z", "02:00 CEST");
  assert.equal(nextFireAfter("0 2 * * *", "UTC", at)?.toISOString(), "2026-06-02T02:00:00.000Z");
});

test("daylight saving: a time the clocks skip fires after the gap, a time they repeat fires once", () => {
  // America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST.
  const skipped = nextFireAfter("30 2 * * *", "America/New_York", new Date("2026-03-08T05:00:00Z"));
  assert.equal(skipped?.toISOString(), "2026-03-08T07:00:00.000Z", "02:30 does not exist that day: 03:00 EDT");
  const fires: string[] = [];
  let t = new Date("2026-10-31T12:00:00Z");
  for (let i = 0; i < 3; i++) {
    t = nextFireAfter("30 1 * * *", "America/New_York", t)!;
    fires.push(t.toISOString());
  }
  assert.deepEqual(fires, ["2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z", "2026-11-03T06:30:00.000Z"], "01:30 once a day");
});

test("daylight saving: a list, range, step or wildcard in minute or hour follows the wall clock (README, Schedules)", () => {
  // Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET.
  const fires = (cron: string, from: string, n: number): string[] => {
    const out: string[] = [];
    let t = new Date(from);
    for (let i = 0; i < n; i++) out.push((t = nextFireAfter(cron, "Europe/Berlin", t)!).toISOString());
    return out;
  };
  assert.deepEqual(
    fires("30 2,14 * * *", "2026-03-28T23:00:00Z", 2),
    ["2026-03-29T12:30:00.000Z", "2026-03-30T00:30:00.000Z"],
    "02:30 skipped",
  );
  assert.deepEqual(
    fires("30 2,14 * * *", "2026-10-24T23:00:00Z", 3),
    ["2026-10-25T00:30:00.000Z", "2026-10-25T01:30:00.000Z", "2026-10-25T13:30:00.000Z"],
    "02:30 CEST and 02:30 CET",
  );
  assert.deepEqual(fires("30 * * * *", "2026-10-24T23:45:00Z", 2), ["2026-10-25T00:30:00.000Z", "2026-10-25T01:30:00.000Z"], "both 02:30s");
});

test("parseSchedule: the interpreter by extension unless given, the first fire time, field paths", () => {
  const now = new Date("2026-06-01T10:00:30Z");
  const s = parseSchedule(
    "nightly",
    { cron: "0 3 * * *", tz: "Europe/Paris", reaction: { kind: "script", source: "x", filename: "n.py" } },
    now,
  );
  assert.deepEqual(s.reaction.interpreter, ["python3"]);
  assert.equal(s.nextFireAt.toISOString(), "2026-06-02T01:00:00.000Z");
  const given = parseSchedule(
    "n",
    { cron: "@hourly", reaction: { kind: "script", source: "x", filename: "n.py", interpreter: ["python3", "-u"] } },
    now,
  );
  assert.deepEqual([given.timeZone, given.reaction.interpreter], ["UTC", ["python3", "-u"]]);
  assert.throws(
    () => parseSchedule("n", { cron: "@hourly", reaction: { kind: "script", source: "x", filename: "a/b" } }, now),
    /base name/,
  );
  assert.throws(() => parseSchedule("n", { cron: "@hourly", reaction: { kind: "script", source: "x", filename: "b" }, x: 1 }, now), /x/);
});
