/**
 * Property-based tests of the cron wrapper (core/src/cron.ts): any cron text and any zone text
 * either passes (and then a next fire time is computed without a throw) or is refused with
 * invalid_argument naming `cron` or `tz`, never another error, each case within a bound. Seeded
 * and bounded: a failure prints fast-check's seed and path, which replay it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { checkSchedule } from "./cron.js";
import { FlowError } from "./errors.js";

const CASE_MS = 2000;
const NOW = new Date("2026-06-01T10:00:30Z");

const FIELD = fc.oneof(
  fc.constantFrom("*", "*/5", "0", "59", "60", "1-5", "5-1", "1,2,3", "MON-FRI", "JAN", "L", "?", "W", "#", "1e400", "-1", "0x10", "*/0"),
  fc.string({ maxLength: 8 }),
  fc.nat({ max: 100000 }).map(String),
);
const CRON = fc.oneof(
  fc.array(FIELD, { minLength: 0, maxLength: 8 }).map((f) => f.join(" ")),
  fc.constantFrom("@daily", "@hourly", "@reboot", "@", "\u0000", "\ud800", " ".repeat(300)),
  fc.string({ maxLength: 300 }),
);
const ZONE = fc.oneof(
  fc.constantFrom("UTC", "Europe/Berlin", "America/New_York", "Asia/Kathmandu", "Etc/GMT+12", "../etc/passwd", "", "\u0000", "utc"),
  fc.string({ maxLength: 70 }),
);

void test("any cron and zone text passes with a next fire time or is refused naming cron or tz", () => {
  fc.assert(
    fc.property(CRON, ZONE, (cron, zone) => {
      const t0 = performance.now();
      try {
        const s = checkSchedule(cron, zone, NOW);
        assert.ok(s.next.getTime() > NOW.getTime(), `${cron} in ${zone}: the next fire is after now`);
      } catch (err) {
        assert.ok(err instanceof FlowError, `${JSON.stringify(cron)} ${JSON.stringify(zone)}: ${String(err)}`);
        assert.equal(err.code, "invalid_argument");
        assert.match(err.message, /^(cron|tz): /);
      }
      assert.ok(performance.now() - t0 < CASE_MS, `${JSON.stringify(cron)}: took over ${CASE_MS} ms`);
    }),
    { seed: 4242, numRuns: 400 },
  );
});
