/**
 * The short crash and fault suite in `npm test` (the full one is `npm run soak`): a small workload
 * of step-heavy scripts, hook deliveries and a handler chain through two server SIGKILLs (each
 * restarted on the same data dir and embedded Postgres), an agent SIGKILL and a termination of the
 * server's Postgres connections, each fault once a script is in flight (conditions, not timers).
 * Asserts the counts, not times: nothing lost, run twice or doubled. A body re-run that is the
 * contract (its agent killed, or its lease lapsed, before its result was recorded) is counted apart
 * by soak-kit.ts's rule, and printed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { runSoak } from "./soak-kit.js";

void test("through server and agent kills and dropped Postgres connections nothing acknowledged is lost, run twice or delivered twice", async (t) => {
  const f = await runSoak({
    serverKills: 2,
    agentKills: 1,
    terminations: 1,
    scripts: 4,
    steps: 4,
    deliveries: 4,
    deadlineMs: 180_000,
    settleMs: 180_000,
  });
  const { details, ...figures } = f;
  t.diagnostic(JSON.stringify(figures));
  for (const d of details) t.diagnostic(d);
  const detail = `${JSON.stringify(figures)}\n${details.join("\n")}`;
  assert.ok(f.serverKills === 2 && f.agentKills === 1 && f.backendsTerminated >= 1, `every fault was injected: ${detail}`);
  assert.equal(f.scriptsAcknowledged, 4, `every submit was acknowledged in the end: ${detail}`);
  assert.equal(f.deliveriesAcknowledged, 4, `every delivery was acknowledged in the end: ${detail}`);
  assert.equal(f.runsLost, 0, detail);
  assert.equal(f.stepsRunTwice, 0, detail);
  assert.equal(f.acceptedWithoutEvent, 0, detail);
  assert.equal(f.eventsDeliveredTwice, 0, detail);
  assert.ok(f.stepExecutions >= 4 * 4 + 2 * 4, `every step ran: ${detail}`);
});
