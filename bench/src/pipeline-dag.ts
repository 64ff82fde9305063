/**
 * Issue 11's first pipeline benchmark: a pipeline of 20 jobs in a diamond-shaped DAG of trivial
 * `run:` steps (one start job, 18 parallel jobs that need it, one job that needs them all), submit
 * (`POST runs {as: pipeline}`, compile included) to `succeeded`. Target: < 2 s. Figures only.
 */
import { api, fmt, median, startBenchServer, waitForRun, wallMs } from "./support.js";

const MIDDLE = 18;
const ROUNDS = 3;

const pipeline = (): string => {
  const lines = ["version: flowsvc/pipeline/v1", "jobs:", "  start:", "    steps: [{run: 'true'}]"];
  for (let i = 0; i < MIDDLE; i++) lines.push(`  m${i}:`, "    needs: start", "    steps: [{run: 'true'}]");
  lines.push("  join:", `    needs: [${Array.from({ length: MIDDLE }, (_, i) => `m${i}`).join(", ")}]`, "    steps: [{run: 'true'}]");
  return `${lines.join("\n")}\n`;
};

const main = async (): Promise<void> => {
  const source = pipeline();
  const server = await startBenchServer();
  const submit = async (): Promise<string> =>
    (await api<{ id: string }>(server, "POST", "/runs", { as: "pipeline", source, filename: "diamond.yaml" })).id;
  try {
    await waitForRun(server, await submit());
    const walls: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const run = await waitForRun(server, await submit());
      if (run.status !== "succeeded") throw new Error(`run ${run.id} ${run.status}: ${run.error}`);
      walls.push(wallMs(run));
    }
    console.log(
      `pipeline of ${MIDDLE + 2} jobs in a diamond (trivial run: steps, 4 agents), submit to succeeded, ${ROUNDS} runs after one warm-up`,
    );
    console.log(`  median ${fmt(median(walls))}   min ${fmt(Math.min(...walls))}   max ${fmt(Math.max(...walls))}`);
    console.log("  target < 2 s");
  } finally {
    await server.stop();
  }
};

await main();
