/**
 * Emit to handler-run-started latency: p50 and p99 over 500 events. One script handler on
 * `bench.tick`; events are emitted over HTTP with at most 8 handler runs in flight (the project
 * allows 16); the latency of each is the handler run's `started_at` (its agent claimed the job)
 * minus the event's `created_at`, both server timestamps. Target (issue 4): p50 under 50 ms.
 */
import { api, fmt, percentile, startBenchServer, type BenchRun } from "./support.js";

const EVENTS = Number(process.argv[2] ?? 500);
const IN_FLIGHT = 8;

interface EmitAnswer {
  id: string;
  handler_runs: string[];
}

const main = async (): Promise<void> => {
  const server = await startBenchServer(2, { FLOWSVC_AGENT_POOLS: `polyglot:${IN_FLIGHT}` });
  try {
    await api(server, "PUT", "/handlers/bench", { on: ["bench.tick"], reaction: { kind: "script", source: "true\n", filename: "h.sh" } });
    const latencies: number[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < EVENTS) {
        next++;
        const e = await api<EmitAnswer>(server, "POST", "/events", { type: "bench.tick", payload: { n: next } });
        const event = await api<{ created_at: string }>(server, "GET", `/events/${e.id}`);
        const runId = e.handler_runs[0]!;
        for (;;) {
          const run = await api<BenchRun>(server, "GET", `/runs/${runId}`);
          if (run.started_at && ["succeeded", "failed"].includes(run.status)) {
            latencies.push(new Date(run.started_at).getTime() - new Date(event.created_at).getTime());
            break;
          }
          await new Promise((r) => setTimeout(r, 10));
        }
      }
    };
    const started = Date.now();
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    console.log(`emit -> handler run started, ${latencies.length} events, ${IN_FLIGHT} in flight, ${((Date.now() - started) / 1000).toFixed(1)} s in all`);
    console.log(`  p50 ${fmt(percentile(latencies, 50))}   p99 ${fmt(percentile(latencies, 99))}   max ${fmt(Math.max(...latencies))}`);
    console.log("  target: p50 < 50 ms (handler runs go to local agent processes that are already running)");
  } finally {
    await server.stop();
  }
};

await main();
