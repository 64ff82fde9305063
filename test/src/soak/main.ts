/**
 * `npm run soak`: the full crash and fault suite (soak-kit.ts), bounded in time; prints its figures
 * and exits 1 when any of runs lost, steps run twice, 202s without an event or events delivered
 * twice to a handler is not 0. An argument names a directory to keep the server's and Postgres's logs in.
 */
/* eslint-disable no-console -- a benchmark-like runner: its figures go to stdout */
import { runSoak } from "./soak-kit.js";

const figures = await runSoak({
  serverKills: 20,
  agentKills: 10,
  terminations: 10,
  scripts: 60,
  steps: 10,
  deliveries: 120,
  workloadMs: 150_000,
  deadlineMs: 8 * 60_000,
  log: (line) => console.log(`soak: ${new Date().toISOString().slice(11, 19)} ${line}`),
  keepLogs: process.argv[2],
});
const { details, ...shown } = figures;
console.log(JSON.stringify(shown, null, 2));
for (const d of details) console.log(`  ${d}`);
const bad = figures.runsLost + figures.stepsRunTwice + figures.acceptedWithoutEvent + figures.eventsDeliveredTwice;
console.log(
  `soak: runs lost ${figures.runsLost}, steps run twice ${figures.stepsRunTwice}, 202s without an event ${figures.acceptedWithoutEvent}, ` +
    `events delivered twice ${figures.eventsDeliveredTwice} (${(figures.wallMs / 1000).toFixed(1)} s)`,
);
process.exit(bad === 0 ? 0 : 1);
