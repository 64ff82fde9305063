/**
 * In-script call overhead, median of 200 calls each, measured inside one script run on a real
 * server: a new `flow step` (recorded over the agent API), the same 200 replayed after a
 * `flow sleep 0s`, beside `node -e 0` and a bare native exec (`/bin/true`) timed in the same run.
 * Targets (issue 3): replayed call under 5 ms, new call under 15 ms.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fmt, median, startBenchServer, submitScript, waitForRun } from "./support.js";

const N = 200;

const SCRIPT = `
out="$BENCH_OUT"
if [ -e "$out.first" ]; then pass=replayed; else pass=new; : > "$out.first"; fi
t() { local s=$EPOCHREALTIME; "$@" > /dev/null; local e=$EPOCHREALTIME; echo "$1-$pass $s $e" >> "$out"; }
for i in $(seq 1 ${N}); do s=$EPOCHREALTIME; flow step "s$i" -- true > /dev/null; e=$EPOCHREALTIME; echo "step-$pass $s $e" >> "$out"; done
if [ "$pass" = new ]; then
  for i in $(seq 1 ${N}); do t node -e 0; done
  for i in $(seq 1 ${N}); do t /bin/true; done
fi
flow sleep 0s
`;

const main = async (): Promise<void> => {
  const dir = await mkdtemp(join(tmpdir(), "flowsvc-bench-calls-"));
  const out = join(dir, "timings");
  const server = await startBenchServer();
  try {
    const run = await waitForRun(server, await submitScript(server, "calls.sh", SCRIPT, { BENCH_OUT: out }));
    if (run.status !== "succeeded") throw new Error(`bench run ${run.status}: ${run.error}`);
    const samples = new Map<string, number[]>();
    for (const line of (await readFile(out, "utf8")).trim().split("\n")) {
      const [what, s, e] = line.split(" ");
      const ms = (Number(e) - Number(s)) * 1000;
      samples.set(what!, [...(samples.get(what!) ?? []), ms]);
    }
    const row = (label: string, key: string): string =>
      `  ${label.padEnd(34)} ${fmt(median(samples.get(key) ?? [NaN]))}  (n=${samples.get(key)?.length ?? 0})`;
    console.log(`in-script call overhead, median of ${N} (client: ${process.env["FLOW_CLIENT"] ?? "native when built"})`);
    console.log(row("/bin/true (bare native exec)", "/bin/true-new"));
    console.log(row("node -e 0", "node-new"));
    console.log(row("flow step, new (recorded)", "step-new"));
    console.log(row("flow step, replayed", "step-replayed"));
    console.log("  targets: replayed < 5 ms, new < 15 ms");
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
};

await main();
