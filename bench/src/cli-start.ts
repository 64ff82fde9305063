/**
 * How fast the user CLI starts (issue 15 item 1), in one run: `node -e 0` beside `flow --version`,
 * `flow status <id>`, `flow runs ls`, `flow submit <file>`, `flow follow <id>` and `flow emit <type>`,
 * each spawned ROUNDS times, the cases interleaved so a load spike hits them alike. Two floors are
 * timed beside them: a `node -e` that only sends one GET, through node:http and through node:net
 * (what any command that sends a request costs at least, with either client). For the three API commands the figure is the time
 * from spawn to the request's arrival at a stand-in API on 127.0.0.1 (a plain node:http server in
 * this process that answers what each command expects); the total wall to exit is printed beside it.
 * Target: every command within 1.5x `node -e 0` (medians). The 10th percentiles and their ratio are
 * printed beside them: on a loaded host they move far less with the load. Figures only, nothing asserted.
 * CLI_START_ROUNDS (default 20) sets the rounds. CLI_START_FLOW times other builds beside this
 * worktree's (say, main's, for a before/after in one run): `label=path/to/flow.js`, comma-separated.
 * The machine's load average is printed beside the figures (the host is shared: compare ratios).
 * CLI_START_MORE=1 adds every other user command a person types that sends a request (signal,
 * approve, rerun, cancel, login, and each subcommand of secret, credential, account, member, events,
 * event-hook, handler, schedule, agents and graph): the default run stays short. The CPU each process
 * used to exit (user + system, from this process's waited-for children) is printed beside: its mean
 * moves less with the load than the wall times.
 */
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fmt, median, percentile } from "./support.js";

const ROUNDS = Number(process.env.CLI_START_ROUNDS ?? 20);
const MORE = process.env.CLI_START_MORE === "1";
const OWN_FLOW = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "cli", "bin", "flow.js");
/** The builds to time: this worktree's, then each `label=path` of CLI_START_FLOW. */
const FLOWS: ReadonlyArray<[string, string]> = [
  ["", OWN_FLOW],
  ...(process.env.CLI_START_FLOW ?? "")
    .split(",")
    .filter((item) => item.trim() !== "")
    .map((item): [string, string] => {
      const at = item.indexOf("=");
      return at < 0 ? [`${item} `, item] : [`${item.slice(0, at)} `, item.slice(at + 1)];
    }),
];
const RUN = {
  id: "run-01jd8k2m3n4p5q6r7s8t9v0w1x",
  status: "succeeded",
  created_at: new Date().toISOString(),
  started_at: null,
  finished_at: null,
  output: null,
  error: null,
};

interface Sample {
  firstRequest?: number;
  wall: number;
  /** user + system CPU to exit, ms (clock ticks: 10 ms each, so only the mean over the rounds says much). */
  cpu: number;
}

/** Any one resource the `set`, `show`, `rm` and the like of the other commands read (hook, handler, schedule, graph, event, ...). */
const THING = {
  name: "x",
  id: "x",
  mode: "token",
  event_type: "t",
  manifest: null,
  hmac_header: null,
  hmac_prefix: null,
  emits: "t",
  ingest_url: "http://127.0.0.1/hooks/x",
  created_at: RUN.created_at,
  updated_at: RUN.created_at,
  rotated_at: null,
  on: ["a.b"],
  when: null,
  reaction: { kind: "script", filename: "job.sh", size: 8, source: "echo hi\n", interpreter: ["bash", "-eu"] },
  tags: [],
  credentials: [],
  cron: "@daily",
  tz: "UTC",
  paused: false,
  next_fire_at: null,
  last_fired_at: null,
  last_run_id: null,
  created_by: null,
  nodes: 1,
  endpoints: [],
  document: {},
  ready: true,
  type: "t",
  payload: null,
  exists: true,
  set_at: RUN.created_at,
  kind: "api_key",
  revoked: false,
  changed: true,
  disabled: [],
  role: "member",
  added: true,
  platform: [],
  declared: [],
  seen: [],
};

const LISTS = /\/(secrets|handlers|event-hooks|schedules|graphs|events|agents|credentials|accounts|members)$/;

/** Answers by path alone: the gates of a run and the answer to one (approve), the caller (login). */
const SPECIAL: ReadonlyArray<[RegExp, unknown]> = [
  [/\/approvals$/, { run_id: RUN.id, gates: [{ gate: "g", prompt: "p", fields: [] }] }],
  [/\/approvals\//, { run_id: RUN.id, gate: "g", decision: "approve", approved_by: "bench", fields: {} }],
  [/\/whoami$/, { user: "bench", projects: [{ org: "default", project: "default", role: "admin" }] }],
];

/** What the stand-in API answers: each command's request gets a body it accepts. */
const answerOf = (method: string, url: string): unknown => {
  const path = url.split("?")[0] ?? "";
  const special = SPECIAL.find(([pattern]) => pattern.test(path));
  if (special) return special[1];
  if (method === "POST" && (path.endsWith("/runs") || path.endsWith("/events"))) return { id: RUN.id };
  if (path.endsWith("/runs")) return { runs: [RUN] };
  if (/\/runs\/[^/]+\/steps$/.test(path)) return { steps: [] };
  if (/\/runs\/[^/]+(\/cancel|\/rerun)?$/.test(path)) return RUN;
  if (method === "GET" && LISTS.test(path)) return { items: [] };
  return THING;
};

/** The stand-in API: notes when each request arrives (performance.now of this process) and answers it. */
const startApi = async (): Promise<{ url: string; arrivals: number[]; stop: () => Promise<void> }> => {
  const arrivals: number[] = [];
  const server = createServer((req, res) => {
    arrivals.push(performance.now());
    req.resume();
    req.on("end", () => {
      const body = answerOf(req.method ?? "GET", req.url ?? "");
      res.writeHead(req.method === "POST" ? 201 : 200, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    arrivals,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
};

/** The CPU (user + system, ms) of this process's children that ended and were waited for: /proc/self/stat's cutime and cstime. */
const TICK_MS = 1000 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
const childrenCpu = (): number => {
  const stat = readFileSync("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[13]) + Number(fields[14])) * TICK_MS;
};

/** Spawns one process and answers its wall time, its CPU and, when it sent one, the time to its first request. */
const timeOne = async (args: string[], env: NodeJS.ProcessEnv, arrivals: number[]): Promise<Sample> => {
  const seen = arrivals.length;
  const cpuBefore = childrenCpu();
  const start = performance.now();
  const child = spawn(process.execPath, args, { env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const [code] = (await once(child, "close")) as [number | null];
  const wall = performance.now() - start;
  if (code !== 0) throw new Error(`${args.join(" ")} exited ${code}: ${stderr}`);
  const arrival = arrivals[seen];
  return { wall, cpu: childrenCpu() - cpuBefore, ...(arrival === undefined ? {} : { firstRequest: arrival - start }) };
};

/**
 * CLI_START_MORE: every other user command a person types that sends a request (each subcommand of
 * table.ts's commands), with arguments each accepts from the stand-in API. `login` writes its own config.
 */
const moreCases = (label: string, flow: string, files: { script: string; graph: string; loginConfig: string }): Case[] => {
  const id = RUN.id;
  const calls: string[][] = [
    ["signal", id, "go"],
    ["approve", id],
    ["rerun", id, "--from", "deploy"],
    ["cancel", id],
    ["secret", "set", "API_TOKEN", "v"],
    ["secret", "list"],
    ["secret", "get", "API_TOKEN"],
    ["secret", "rm", "API_TOKEN"],
    ["credential", "set", "llm", "--kind", "api-key", "--header", "x-api-key", "--value", "v"],
    ["credential", "list"],
    ["credential", "rm", "llm"],
    ["account", "list"],
    ["account", "disable", "github"],
    ["account", "rm", "github"],
    ["member", "ls"],
    ["member", "set", "ann", "--role", "member"],
    ["member", "rm", "ann"],
    ["events", "ls"],
    ["events", "show", "evt-1"],
    ["events", "catalog"],
    ["event-hook", "set", "x", "--event-type", "t"],
    ["event-hook", "ls"],
    ["event-hook", "show", "x"],
    ["event-hook", "rm", "x"],
    ["event-hook", "rotate", "x"],
    ["handler", "set", "x", files.script, "--on", "a.b"],
    ["handler", "ls"],
    ["handler", "show", "x"],
    ["handler", "rm", "x"],
    ["schedule", "set", "x", files.script, "--cron", "@daily"],
    ["schedule", "ls"],
    ["schedule", "show", "x"],
    ["schedule", "rm", "x"],
    ["schedule", "pause", "x"],
    ["schedule", "resume", "x"],
    ["agents", "ls"],
    ["graph", "set", "x", files.graph],
    ["graph", "ls"],
    ["graph", "show", "x"],
    ["graph", "rm", "x"],
    ["graph", "requirements", "x"],
  ];
  const shown = (args: string[]): string =>
    args.map((a) => (a === id ? "<id>" : a === files.script ? "<file>" : a === files.graph ? "<graph.json>" : a)).join(" ");
  return [
    ...calls.map((args): Case => [`${label}flow ${shown(args)}`, [flow, ...args]]),
    [`${label}flow login --token t`, [flow, "login", "--token", "t"], { FLOWSVC_CONFIG: files.loginConfig }],
  ];
};

/** One case: its label, node's arguments, and environment variables of its own. */
type Case = [string, string[], NodeJS.ProcessEnv?];

const main = async (): Promise<void> => {
  const dir = await mkdtemp(join(tmpdir(), "flowsvc-bench-cli-"));
  const api = await startApi();
  const script = join(dir, "job.sh");
  await writeFile(script, "echo hi\n");
  const env = { PATH: process.env.PATH, HOME: dir, FLOWSVC_URL: api.url, FLOWSVC_TOKEN: "bench", FLOWSVC_CONFIG: join(dir, "none.json") };
  const { port } = new URL(api.url);
  const rawGet = `const s=require("node:net").connect(${port},"127.0.0.1",()=>s.write("GET /floor HTTP/1.1\\r\\nhost: x\\r\\nconnection: close\\r\\n\\r\\n"));s.resume()`;
  const graph = join(dir, "graph.json");
  await writeFile(graph, "{}\n");
  const files = { script, graph, loginConfig: join(dir, "login.json") };
  const cases: Case[] = [
    ["node -e 0", ["-e", "0"]],
    ["node: one GET, node:http", ["-e", `require("node:http").get("${api.url}/floor", (r) => r.resume())`]],
    ["node: one GET, node:net", ["-e", rawGet]],
  ];
  for (const [label, flow] of FLOWS) {
    cases.push(
      [`${label}flow --version`, [flow, "--version"]],
      [`${label}flow status <id>`, [flow, "status", RUN.id]],
      [`${label}flow runs ls`, [flow, "runs", "ls"]],
      [`${label}flow submit <file>`, [flow, "submit", script]],
      [`${label}flow follow <id>`, [flow, "follow", RUN.id]],
      [`${label}flow emit <type>`, [flow, "emit", "bench.done"]],
    );
    if (!MORE) continue;
    cases.push(...moreCases(label, flow, files));
  }
  const samples = new Map<string, Sample[]>(cases.map(([label]) => [label, []]));
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < cases.length; i++) {
        const [label, args, own] = cases[(i + round) % cases.length]!;
        samples.get(label)!.push(await timeOne(args, { ...env, ...own }, api.arrivals));
      }
    }
  } finally {
    await api.stop();
    await rm(dir, { recursive: true, force: true });
  }
  const baseWalls = samples.get("node -e 0")!.map((s) => s.wall);
  const base = median(baseWalls);
  // On a loaded host a start-up is mostly waiting for a core; the 10th percentile is the start-up with
  // little of that wait, which is what a quiet host sees (its ratio moves far less with the load than p50's).
  const baseP10 = percentile(baseWalls, 10);
  const width = Math.max(...cases.map(([label]) => label.length)) + 2;
  console.log(`CLI start-up, ${ROUNDS} rounds interleaved; "ready" is the first request as the API saw it (else the exit)`);
  console.log(
    `  load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")} on ${cpus().length} cores`,
  );
  // CPU to exit: the mean (ticks of 10 ms: a median would only say 0, 10 or 20), and its ratio to node -e 0's.
  const meanCpu = (label: string): number => {
    const list = samples.get(label)!;
    return list.reduce((sum, s) => sum + s.cpu, 0) / list.length;
  };
  const baseCpu = meanCpu("node -e 0");
  console.log(
    `  ${"".padEnd(width)} ${"ready p10".padStart(10)} ${"ready p50".padStart(10)} ${"ready p90".padStart(10)} ${"wall p50".padStart(10)} ${"x node -e 0".padStart(12)} ${"p10 x p10".padStart(10)} ${"cpu mean".padStart(10)} ${"cpu x".padStart(6)}`,
  );
  for (const [label] of cases) {
    const list = samples.get(label)!;
    const ready = list.map((s) => s.firstRequest ?? s.wall);
    const wall = list.map((s) => s.wall);
    const ratio = (median(ready) / base).toFixed(2);
    const ratioP10 = (percentile(ready, 10) / baseP10).toFixed(2);
    const cpuRatio = (meanCpu(label) / baseCpu).toFixed(2);
    console.log(
      `  ${label.padEnd(width)} ${fmt(percentile(ready, 10)).padStart(10)} ${fmt(median(ready)).padStart(10)} ${fmt(percentile(ready, 90)).padStart(10)} ${fmt(median(wall)).padStart(10)} ${`${ratio}x`.padStart(12)} ${`${ratioP10}x`.padStart(10)} ${fmt(meanCpu(label)).padStart(10)} ${`${cpuRatio}x`.padStart(6)}`,
    );
  }
  console.log("  target (issue 15): each flow command ready within 1.5x node -e 0 (aim: 1.35x, so noise does not flip it)");
};

await main();
