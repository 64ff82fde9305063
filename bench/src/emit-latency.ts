/**
 * Emit to handler-run-started latency: p50 and p99 over 500 events, in two scenarios on one
 * server: one event at a time (the latency of the path itself), and 8 handler runs in flight
 * (the project allows 16; on 2 cores this saturates the CPU, so it shows queueing as well). One
 * script handler on `bench.tick`; events are emitted over HTTP and each waits for its handler run
 * to end (its log stream ends) before the next goes out. The latency of each is the handler run's `started_at` (its
 * agent claimed the job) minus the event's `created_at`, both server timestamps.
 * Target (issue 4): p50 under 50 ms; issue 15: under 20 ms with 8 in flight. CPU per handler run
 * (server, its agents, Postgres; the bench's own requests included) is printed beside each.
 */
import type { TestServer } from "@flowsvc/test/support/server";
import { api, cpuPer, followRun, fmt, hostLoad, percentile, startBenchServer, treeCpu } from "./support.js";

const EVENTS = Number(process.argv[2] ?? 500);
const IN_FLIGHT = 8;

interface EmitAnswer {
  id: string;
  handler_runs: string[];
}

/** Emits `events` events with at most `inFlight` handler runs under way; the latency of each. */
const measure = async (server: TestServer, events: number, inFlight: number): Promise<{ latencies: number[]; seconds: number }> => {
  const latencies: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < events) {
      next++;
      const e = await api<EmitAnswer>(server, "POST", "/events", { type: "bench.tick", payload: { n: next } });
      const event = await api<{ created_at: string }>(server, "GET", `/events/${e.id}`);
      const runId = e.handler_runs[0]!;
      const run = await followRun(server, runId);
      if (!run.started_at || !["succeeded", "failed"].includes(run.status))
        throw new Error(`handler run ${runId} is ${run.status} after its log ended`);
      latencies.push(new Date(run.started_at).getTime() - new Date(event.created_at).getTime());
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: inFlight }, worker));
  return { latencies, seconds: (Date.now() - started) / 1000 };
};

const main = async (): Promise<void> => {
  const server = await startBenchServer(IN_FLIGHT); // the default local agents advertise polyglot
  try {
    await api(server, "PUT", "/handlers/bench", { on: ["bench.tick"], reaction: { kind: "script", source: "true\n", filename: "h.sh" } });
    await measure(server, 2 * IN_FLIGHT, IN_FLIGHT); // warm-up: every agent of the pool started, plans cached
    console.log(
      `emit -> handler run started (server timestamps), ${EVENTS} events per scenario; target (issue 15): p50 < 20 ms at 8 in flight (${hostLoad()})`,
    );
    for (const inFlight of [1, IN_FLIGHT]) {
      const cpu0 = treeCpu(server.process.pid!);
      const { latencies, seconds } = await measure(server, EVENTS, inFlight);
      const cpu = cpuPer(cpu0, treeCpu(server.process.pid!), latencies.length);
      console.log(
        `  ${String(inFlight).padStart(2)} in flight: p50 ${fmt(percentile(latencies, 50))}   p99 ${fmt(percentile(latencies, 99))}   max ${fmt(Math.max(...latencies))}   ` +
          `(${(latencies.length / seconds).toFixed(1)} handler runs/s, ${seconds.toFixed(1)} s; CPU per handler run: ${cpu})`,
      );
    }
    console.log("  handler runs go to local agent processes that are already running; at 8 in flight on 2 cores the runs queue for CPU");
  } finally {
    await server.stop();
  }
};

await main();
