/**
 * Replay cost: a script with 50 steps and 10 zero-length sleeps (5 steps, then a sleep, ten
 * times). Each sleep frees the agent slot; the next pass replays the script from the top on a
 * local agent process that is already running (agents are reused, controller/src/local-launcher.ts).
 * Prints the total wall time, the same script without the sleeps, and the cost per replayed call:
 * (with sleeps - without) / replayed calls, which includes the 10 suspends, wake-ups and dispatches.
 */
import { fmt, startBenchServer, submitScript, waitForRun, wallMs } from "./support.js";

const block = (b: number, sleep: boolean): string =>
  Array.from({ length: 5 }, (_, i) => `flow step b${b}s${i} -- true > /dev/null`).join("\n") + (sleep ? "\nflow sleep 0s" : "");
const script = (sleep: boolean): string => Array.from({ length: 10 }, (_, b) => block(b, sleep)).join("\n") + "\n";
/** After sleep j (1..10) the replay re-runs the 6j calls before and including it. */
const REPLAYED = Array.from({ length: 10 }, (_, j) => 6 * (j + 1)).reduce((a, b) => a + b, 0);

const main = async (): Promise<void> => {
  const server = await startBenchServer();
  try {
    await waitForRun(server, await submitScript(server, "warmup.sh", "flow step warm -- true\n"));
    const plain = await waitForRun(server, await submitScript(server, "plain.sh", script(false)));
    const sleepy = await waitForRun(server, await submitScript(server, "replay.sh", script(true)));
    for (const r of [plain, sleepy]) if (r.status !== "succeeded") throw new Error(`run ${r.id} ${r.status}: ${r.error}`);
    const perCall = (wallMs(sleepy) - wallMs(plain)) / REPLAYED;
    console.log("replay cost: 50 steps and 10 zero-length sleeps (11 passes)");
    console.log(`  total wall time               ${fmt(wallMs(sleepy))}`);
    console.log(`  same 50 steps, no sleeps      ${fmt(wallMs(plain))}`);
    console.log(`  replayed calls                ${REPLAYED}`);
    console.log(`  per replayed call             ${fmt(perCall)} (includes 10 suspends, wake-ups and dispatches)`);
    console.log(`  per pass (suspend + wake + dispatch to a running agent + replay)  ${fmt((wallMs(sleepy) - wallMs(plain)) / 10)}`);
  } finally {
    await server.stop();
  }
};

await main();
