/**
 * Issue 15 item 8: 10,000 parked runs. Submits PARKED_RUNS scripts over HTTP (PARKED_BATCH at a
 * time), half parking on `flow sleep 1h` and half on `flow wait-signal go`, waits until all are
 * parked, and prints the server's RSS and V8 heap (its /metrics) before and after: a parked run
 * must cost the server nothing in memory (target: flat within 50 MB). Then signal-to-resume latency
 * over PARKED_SIGNALS signals sent one after another to parked signal runs: from the signal's HTTP
 * 202 (as this process saw it) to the resumed script's first command after `flow wait-signal`,
 * which writes `date +%s%N` to a file (target: p50 under 100 ms). Both clocks are this host's.
 * Figures only; the load average is printed beside them (the host is shared).
 */
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import type { TestServer } from "@flowsvc/test/support/server";
import { api, fmt, median, percentile, startBenchServer } from "./support.js";

const RUNS = Number(process.env.PARKED_RUNS ?? 10_000);
const SIGNALS = Math.min(Number(process.env.PARKED_SIGNALS ?? 200), Math.floor(RUNS / 2));
const BATCH = Number(process.env.PARKED_BATCH ?? 50);
const AGENTS = Number(process.env.PARKED_AGENTS ?? 4);

const SLEEPER = "flow sleep 1h\n";
// MARK_DIR and MARK come from the run's env. The script's first line notes when it started (a
// replay runs it again, so after the signal it holds the resumed script's start); the first command
// after the wait marks the resume.
const WAITER = 'date +%s%N > "$MARK_DIR/$MARK.start"\npayload=$(flow wait-signal go)\ndate +%s%N > "$MARK_DIR/$MARK"\n';

const epochMs = (): number => performance.timeOrigin + performance.now();

const metricsOf = async (server: TestServer): Promise<Map<string, number>> => {
  const res = await request(`${server.url}/metrics`);
  const out = new Map<string, number>();
  for (const line of (await res.body.text()).split("\n")) {
    if (line.startsWith("#") || line.trim() === "") continue;
    const at = line.lastIndexOf(" ");
    const key = line.slice(0, at);
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(at + 1)));
  }
  return out;
};

/** The sum of a metric's series whose labels contain `labels` (e.g. `status="parked"`). */
const metricSum = (metrics: Map<string, number>, name: string, labels = ""): number => {
  let sum = 0;
  for (const [key, value] of metrics) if ((key === name || key.startsWith(`${name}{`)) && key.includes(labels)) sum += value;
  return sum;
};

const rssMb = async (pid: number): Promise<number> => {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
};

interface Memory {
  rss: number;
  heap: number;
}

const memoryOf = async (server: TestServer): Promise<Memory> => ({
  rss: await rssMb(server.process.pid!),
  heap: metricSum(await metricsOf(server), "nodejs_heap_size_used_bytes") / 2 ** 20,
});

/** Submits every run, BATCH requests in flight; answers the signal runs' ids with their marks. */
const submitAll = async (server: TestServer, markDir: string): Promise<Array<{ id: string; mark: string }>> => {
  const waiters: Array<{ id: string; mark: string }> = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < RUNS; i = next++) {
      const mark = `m${i}`;
      const body =
        i % 2 === 0
          ? { kind: "script", source: SLEEPER, filename: "sleeper.sh", tags: ["bench-parked"] }
          : { kind: "script", source: WAITER, filename: "waiter.sh", env: { MARK_DIR: markDir, MARK: mark }, tags: ["bench-parked"] };
      const { id } = await api<{ id: string }>(server, "POST", "/runs", body);
      if (i % 2 === 1) waiters.push({ id, mark });
    }
  };
  await Promise.all(Array.from({ length: BATCH }, worker));
  return waiters;
};

/** Waits until `count` runs are parked (flowsvc_runs is cached 5 s by the server: polled each second). */
const waitParked = async (server: TestServer, count: number): Promise<void> => {
  const deadline = Date.now() + 60 * 60_000;
  for (;;) {
    const metrics = await metricsOf(server);
    const parked = metricSum(metrics, "flowsvc_runs", 'status="parked"');
    const failed = metricSum(metrics, "flowsvc_runs", 'status="failed"');
    if (failed > 0) throw new Error(`${failed} runs failed instead of parking`);
    if (parked >= count) return;
    if (Date.now() > deadline) throw new Error(`only ${parked} of ${count} runs parked after an hour`);
    await new Promise((r) => setTimeout(r, 1000));
  }
};

const markOf = async (file: string): Promise<number | undefined> => {
  try {
    const text = (await readFile(file, "utf8")).trim();
    return text === "" ? undefined : Number(BigInt(text) / 1000n) / 1000;
  } catch {
    return undefined;
  }
};

interface Resume {
  /** 202 to the resumed script's first line: wake, dispatch, claim, the agent starting the script. */
  started: number;
  /** 202 to the first command after `flow wait-signal` (the replayed wait answered over the socket). */
  resumed: number;
}

/** Signals each run in turn and waits for its mark: latency from the 202 to the resumed script's mark. */
const signalLatencies = async (server: TestServer, runs: Array<{ id: string; mark: string }>, markDir: string): Promise<Resume[]> => {
  const out: Resume[] = [];
  for (const run of runs) {
    await api(server, "POST", `/runs/${run.id}/signals/go`, { payload: { n: out.length } });
    const answered = epochMs();
    const file = join(markDir, run.mark);
    const deadline = Date.now() + 120_000;
    let mark: number | undefined;
    while ((mark = await markOf(file)) === undefined) {
      if (Date.now() > deadline) throw new Error(`run ${run.id} did not resume within 120 s of its signal`);
      await new Promise((r) => setTimeout(r, 1));
    }
    const started = (await markOf(`${file}.start`)) ?? NaN;
    out.push({ started: started - answered, resumed: mark - answered });
  }
  return out;
};

const main = async (): Promise<void> => {
  const markDir = await mkdtemp(join(tmpdir(), "flowsvc-bench-parked-"));
  await chmod(markDir, 0o777); // the agents may run as another user
  const server = await startBenchServer(AGENTS);
  // A long run stopped with ^C or kill still stops its server (and the server its agents and Postgres).
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => void server.stop().finally(() => process.exit(130)));
  }
  try {
    const before = await memoryOf(server);
    const t0 = performance.now();
    const waiters = await submitAll(server, markDir);
    const submitted = performance.now() - t0;
    await waitParked(server, RUNS);
    const parkedIn = performance.now() - t0;
    const after = await memoryOf(server);
    const picked = waiters.filter((_, i) => i % Math.max(1, Math.floor(waiters.length / SIGNALS)) === 0).slice(0, SIGNALS);
    const resumes = await signalLatencies(server, picked, markDir);
    const latencies = resumes.map((r) => r.resumed);
    const starts = resumes.map((r) => r.started);
    const afterSignals = await memoryOf(server);
    console.log(`${RUNS} runs parked (half on flow sleep 1h, half on flow wait-signal), ${AGENTS} agents, ${BATCH} submits in flight`);
    console.log(
      `  load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")} on ${cpus().length} cores`,
    );
    console.log(`  submitted in ${fmt(submitted)} (${((RUNS / submitted) * 1000).toFixed(0)}/s), all parked after ${fmt(parkedIn)}`);
    const row = (label: string, m: Memory): string =>
      `  ${label.padEnd(28)} RSS ${m.rss.toFixed(1)} MB   heap used ${m.heap.toFixed(1)} MB`;
    console.log(row("server before", before));
    console.log(row(`server with ${RUNS} parked`, after));
    console.log(row(`after ${latencies.length} signals`, afterSignals));
    console.log(
      `  growth: RSS ${(after.rss - before.rss).toFixed(1)} MB, heap ${(after.heap - before.heap).toFixed(1)} MB (target: within 50 MB)`,
    );
    console.log(
      `  signal 202 -> resumed script: p50 ${fmt(median(latencies))}   p99 ${fmt(percentile(latencies, 99))}   max ${fmt(Math.max(...latencies))} over ${latencies.length} (target p50 < 100 ms)`,
    );
    console.log(
      `    of which 202 -> the script's first line (wake, dispatch, claim, agent start): p50 ${fmt(median(starts))}   p99 ${fmt(percentile(starts, 99))}`,
    );
  } finally {
    await server.stop();
    await rm(markDir, { recursive: true, force: true });
  }
};

await main();
