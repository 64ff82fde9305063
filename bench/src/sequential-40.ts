/**
 * The 40-task sequential workflow, the shape of Windmill's published engine benchmark: one script
 * with 40 light `flow step` calls in sequence, from submit to `succeeded` (server timestamps).
 * Published on a 2-vCPU machine: Hatchet 1.22 s, Temporal 2.97 s, Windmill 4.38 s. Target: < 1 s
 * (issue 15: < 0.4 s). The end is awaited by following the run's log (server push), not by polling.
 */
import { cpuPer, followRun, fmt, hostLoad, median, startBenchServer, submitScript, treeCpu, wallMs, type TreeCpu } from "./support.js";

const SCRIPT = Array.from({ length: 40 }, (_, i) => `flow step task${i + 1} -- echo ${i + 1} > /dev/null`).join("\n") + "\n";
const ROUNDS = 5;

const main = async (): Promise<void> => {
  const server = await startBenchServer();
  try {
    await followRun(server, await submitScript(server, "warmup.sh", "flow step warm -- true\n"));
    const walls: number[] = [];
    const cpu0 = treeCpu(server.process.pid!);
    for (let i = 0; i < ROUNDS; i++) {
      const run = await followRun(server, await submitScript(server, "seq40.sh", SCRIPT));
      if (run.status !== "succeeded") throw new Error(`run ${run.id} ${run.status}: ${run.error}`);
      walls.push(wallMs(run));
    }
    console.log(`40 sequential steps, submit to succeeded, ${ROUNDS} runs after one warm-up (${hostLoad()})`);
    console.log(`  median ${fmt(median(walls))}   min ${fmt(Math.min(...walls))}   max ${fmt(Math.max(...walls))}`);
    const cpu40 = treeCpu(server.process.pid!);
    console.log(`  CPU per step (the run's start and finish included): ${cpuPer(cpu0, cpu40, ROUNDS * 40)}`);
    // The same runs without their steps: what a step alone costs is the difference.
    for (let i = 0; i < ROUNDS; i++) await followRun(server, await submitScript(server, "seq0.sh", "echo 0 > /dev/null\n"));
    const cpu0Steps = treeCpu(server.process.pid!);
    const beyond = (k: keyof TreeCpu): string => ((cpu40[k] - cpu0[k] - (cpu0Steps[k] - cpu40[k])) / (ROUNDS * 40)).toFixed(1);
    console.log(
      `  CPU per step beyond its run's own (${ROUNDS} runs without steps subtracted): server ${beyond("server")}  agents ${beyond("agents")}  postgres ${beyond("postgres")} ms`,
    );
    console.log("  published (2 vCPU): Hatchet 1.22 s, Temporal 2.97 s, Windmill 4.38 s; target < 1 s");
  } finally {
    await server.stop();
  }
};

await main();
