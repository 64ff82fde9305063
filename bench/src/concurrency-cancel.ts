/**
 * Issue 11's second pipeline benchmark: 1,000 runs of one pipeline behind one `cancel-running`
 * concurrency group (`deploy-${{ input.ref }}`), submitted one after another as fast as the API
 * answers (each submit cancels, in its transaction, the run that held the group). Measured: the
 * time from the first submit until only the newest run is live, the submit latency, and that each
 * cancelled run published `run.cancelled` exactly once (none twice, none missing). Figures only.
 */
import { api, fmt, median, percentile, startBenchServer } from "./support.js";

const RUNS = 1000;
const SOURCE = `version: flowsvc/pipeline/v1
concurrency: {group: "deploy-\${{ input.ref }}", policy: cancel-running}
jobs:
  deploy:
    wait_for_event: {type: bench.never, timeout: 1h}
`;

interface Listed {
  id: string;
  status: string;
}

const live = async (server: Awaited<ReturnType<typeof startBenchServer>>): Promise<string[]> => {
  const ids: string[] = [];
  for (const status of ["queued", "running", "parked"])
    ids.push(...(await api<Listed[]>(server, "GET", `/runs?tag=bench-cc&status=${status}&limit=1000`)).map((r) => r.id));
  return ids;
};

const main = async (): Promise<void> => {
  const server = await startBenchServer(2);
  try {
    const submitted: string[] = [];
    const latencies: number[] = [];
    const t0 = performance.now();
    for (let i = 0; i < RUNS; i++) {
      const t = performance.now();
      const { id } = await api<{ id: string }>(server, "POST", "/runs", {
        as: "pipeline",
        source: SOURCE,
        filename: "deploy.yaml",
        input: { ref: "main" },
        tags: ["bench-cc"],
      });
      latencies.push(performance.now() - t);
      submitted.push(id);
    }
    const newest = submitted.at(-1)!;
    for (;;) {
      const ids = await live(server);
      if (ids.length === 1 && ids[0] === newest) break;
      if (!ids.includes(newest)) throw new Error(`the newest run ${newest} is not live: ${ids.join(",")}`);
      await new Promise((r) => setTimeout(r, 5));
    }
    const onlyNewest = performance.now() - t0;
    const events = await api<Array<{ payload: { run_id?: string } }>>(server, "GET", "/events?type=run.cancelled&limit=1000");
    const counts = new Map<string, number>();
    for (const e of events) if (e.payload.run_id) counts.set(e.payload.run_id, (counts.get(e.payload.run_id) ?? 0) + 1);
    const cancelled = submitted.slice(0, -1);
    const once = cancelled.filter((id) => counts.get(id) === 1).length;
    const twice = cancelled.filter((id) => (counts.get(id) ?? 0) > 1).length;
    const missing = cancelled.filter((id) => !counts.has(id)).length;
    console.log(`${RUNS} pipeline runs behind one cancel-running group, submitted one after another (2 agents)`);
    console.log(`  first submit to only the newest live: ${fmt(onlyNewest)}`);
    console.log(
      `  submit latency (each cancels the previous holder): median ${fmt(median(latencies))}   p99 ${fmt(percentile(latencies, 99))}`,
    );
    console.log(`  run.cancelled: ${once} of ${cancelled.length} cancelled runs exactly once, ${twice} more than once, ${missing} missing`);
    if (once !== cancelled.length) process.exitCode = 1;
  } finally {
    await server.stop();
  }
};

await main();
