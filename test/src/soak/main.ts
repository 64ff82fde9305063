/**
 * `npm run soak`: the full crash and fault suite (soak-kit.ts), then the disk-full scenario
 * (disk-full.ts); prints the figures and exits 1 when any of runs lost, steps run twice, 202s
 * without an event or events delivered twice to a handler is not 0, when anything acknowledged
 * was lost to the full disk, or when a request refused for the full disk did not say so. An
 * argument names a directory to keep the server's and Postgres's logs in. `--disk-only` runs only
 * the disk-full scenario.
 */
/* eslint-disable no-console -- a benchmark-like runner: its figures go to stdout */
import { runDiskFull } from "./disk-full.js";
import { runSoak } from "./soak-kit.js";

const log = (line: string): void => console.log(`soak: ${new Date().toISOString().slice(11, 19)} ${line}`);
const args = process.argv.slice(2);
let bad = 0;

if (!args.includes("--disk-only")) {
  const figures = await runSoak({
    serverKills: 20,
    agentKills: 10,
    terminations: 10,
    scripts: 60,
    steps: 10,
    deliveries: 120,
    deadlineMs: 6 * 60_000,
    settleMs: 4 * 60_000,
    log,
    keepLogs: args.find((a) => !a.startsWith("--")),
  });
  const { details, ...shown } = figures;
  console.log(JSON.stringify(shown, null, 2));
  for (const d of details) console.log(`  ${d}`);
  bad += figures.runsLost + figures.stepsRunTwice + figures.acceptedWithoutEvent + figures.eventsDeliveredTwice;
  console.log(
    `soak: runs lost ${figures.runsLost}, steps run twice ${figures.stepsRunTwice} (and, same idempotency key, ${figures.stepsRerunAfterAgentKill} re-run after the soak killed their agent before it recorded them, ${figures.stepsRerunAfterLeaseLoss} after their lease lapsed before it recorded them), ` +
      `202s without an event ${figures.acceptedWithoutEvent}, ` +
      `events delivered twice ${figures.eventsDeliveredTwice} (${(figures.wallMs / 1000).toFixed(1)} s)`,
  );
}

const t0 = Date.now();
const disk = await runDiskFull(log);
if (disk.skipped) console.log(`soak: disk full: SKIPPED: ${disk.skipped}`);
else {
  const unclear = disk.whileFull.filter((w) => !/ -> 2\d\d /.test(w) && !/ -> 503 .*disk is full/.test(w));
  bad += disk.lost + unclear.length + (disk.recovered ? 0 : 1);
  for (const w of disk.whileFull) console.log(`  while full: ${w}`);
  for (const d of disk.details) console.log(`  ${d}`);
  console.log(
    `soak: disk full: acknowledged then lost ${disk.lost}, refusals that did not say the disk is full ${unclear.length}, ` +
      `accepted while full ${disk.acceptedWhileFull}, recovered ${disk.recovered} (${((Date.now() - t0) / 1000).toFixed(1)} s)`,
  );
}
process.exit(bad === 0 ? 0 : 1);
