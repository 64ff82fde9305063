/**
 * Issue 10's first graph benchmark: a 40-node linear graph of `code` nodes that each print a line,
 * from submit to `succeeded` (server timestamps). Each node is an agent job of the run; the driver
 * starts the next when the previous one's state has committed. Target: < 2 s. Figures only.
 */
import { fmt, median, startBenchServer, submitGraph, waitForRun, wallMs } from "./support.js";

const N = 40;
const ROUNDS = 3;

const GRAPH = JSON.stringify({
  version: "flowsvc-graph/v1",
  nodes: Array.from({ length: N }, (_, i) => ({ id: `n${i + 1}`, type: "code", config: { source: `echo node ${i + 1}\n` } })),
  edges: Array.from({ length: N - 1 }, (_, i) => ({ from: `n${i + 1}`, to: `n${i + 2}` })),
});

const main = async (): Promise<void> => {
  const server = await startBenchServer();
  try {
    await waitForRun(
      server,
      await submitGraph(
        server,
        "warmup.json",
        JSON.stringify({ ...JSON.parse(GRAPH), nodes: [{ id: "w", type: "code", config: { source: "true\n" } }], edges: [] }),
      ),
    );
    const walls: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const run = await waitForRun(server, await submitGraph(server, "linear40.json", GRAPH));
      if (run.status !== "succeeded") throw new Error(`run ${run.id} ${run.status}: ${run.error}`);
      walls.push(wallMs(run));
    }
    console.log(`${N}-node linear graph of code nodes, submit to succeeded, ${ROUNDS} runs after one warm-up`);
    console.log(
      `  median ${fmt(median(walls))}   min ${fmt(Math.min(...walls))}   max ${fmt(Math.max(...walls))}   (${fmt(median(walls) / N)} per node)`,
    );
    console.log("  target < 2 s");
  } finally {
    await server.stop();
  }
};

await main();
