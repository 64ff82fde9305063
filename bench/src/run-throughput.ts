/**
 * Run throughput (issue 15 item 7): 200 trivial runs (`echo hi`) submitted over HTTP by 8
 * submitters at once, from the first submit to the last `succeeded` (the server's own created_at
 * and finished_at). Beside it, in the same run: the process-spawn floor (200 `bash -c 'echo hi'`
 * one after another, the bare cost of the runs' processes) and the submit rate during the burst.
 * Target: under 2.5 s (80 runs/s), within about 2.5x the floor.
 *
 * Also printed, from Postgres's own counters over the burst (pg_stat_database, pg_stat_io): the
 * transactions committed and WAL flushes per run, and the median of each run's queue time (submit
 * to claim) and execution time (claim to finish). Completion is watched on a direct connection to
 * the embedded Postgres every 20 ms, so the watcher costs the server nothing.
 *
 * RUN_THROUGHPUT_AGENTS sets `flow server --agents` (default 4, as `flow server`'s own default);
 * RUN_THROUGHPUT_ROUNDS the bursts (default 3). RUN_THROUGHPUT_NODE_OPTIONS is given to the server as
 * NODE_OPTIONS, which its agents inherit (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile both).
 */
import { spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { TERMINAL_STATUSES_SQL } from "@flowsvc/core";
import type { TestServer } from "@flowsvc/test/support/server";
import { api, fmt, median, startBenchServer } from "./support.js";

const RUNS = 200;
const IN_FLIGHT = 8;
const AGENTS = Number(process.env["RUN_THROUGHPUT_AGENTS"] ?? 4);
const ROUNDS = Number(process.env["RUN_THROUGHPUT_ROUNDS"] ?? 3);
const SCRIPT = "echo hi\n";
const NODE_OPTIONS = process.env["RUN_THROUGHPUT_NODE_OPTIONS"];

const load = (): string => `load ${loadavg()[0]!.toFixed(2)}`;

/**
 * The bare cost of the runs' processes: `bash -c 'echo hi'` started and waited for, one after
 * another. Answers the wall time and the CPU per spawn (this process's and the children's).
 */
const spawnFloor = async (n: number): Promise<{ ms: number; cpuMs: number }> => {
  const cpu = (): number => {
    const s = procStat(String(process.pid));
    return s ? s.own + s.children : 0;
  };
  const c0 = cpu();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    await new Promise<void>((resolve, reject) => {
      const child = spawn("bash", ["-c", "echo hi"], { stdio: ["ignore", "pipe", "ignore"] });
      child.stdout.resume();
      child.once("error", reject);
      child.once("close", () => resolve());
    });
  }
  return { ms: performance.now() - t0, cpuMs: ((cpu() - c0) * 1000) / n };
};

/** A superuser connection to the server's embedded Postgres (the port from postmaster.pid). */
const connectEmbedded = async (dataDir: string): Promise<pg.Client> => {
  const pid = readFileSync(join(dataDir, "pg", "postmaster.pid"), "utf8").split("\n");
  const password = readFileSync(join(dataDir, "pg-password"), "utf8").trim();
  const client = new pg.Client({ host: "127.0.0.1", port: Number(pid[3]), user: "postgres", password, database: "flowsvc" });
  await client.connect();
  return client;
};

interface Counters {
  commits: number;
  walFsyncs: number;
}

/** CPU seconds so far, by role: the server process, its agents (their own Node processes), the scripts they reaped, Postgres, this process. */
interface Cpu {
  server: number;
  agents: number;
  scripts: number;
  postgres: number;
  bench: number;
}

/** A burst's CPU per run; `split` is false when an agent was replaced during it (see cpuNow). */
interface BurstCpu extends Cpu {
  split: boolean;
}

interface ProcStat {
  pid: number;
  ppid: number;
  own: number;
  children: number;
  cmd: string;
}

/** utime + stime of a process and of its reaped children, in seconds (Linux /proc; undefined once it is gone). */
const procStat = (pid: string): ProcStat | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // from the state on; times in clock ticks
    return {
      pid: Number(pid),
      ppid: Number(f[1]),
      own: (Number(f[11]) + Number(f[12])) / 100,
      children: (Number(f[13]) + Number(f[14])) / 100,
      cmd,
    };
  } catch {
    return undefined;
  }
};

/** The server and every process under it (other engineers' servers share this host). */
const serverTree = (serverPid: number): ProcStat[] => {
  const all = readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(procStat)
    .filter((p): p is ProcStat => p !== undefined);
  const mine = new Set([serverPid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of all)
      if (!mine.has(p.pid) && mine.has(p.ppid)) {
        mine.add(p.pid);
        grew = true;
      }
  }
  return all.filter((p) => mine.has(p.pid));
};

/**
 * Agents are reused and recycled: one that exits between two readings lands in the server's reaped
 * children with its whole life, which is why those count as the agents' and not the server's. A
 * script's CPU is its agent's once reaped: `scripts` is what the agents reaped, `agents` their own.
 */
const cpuNow = (serverPid: number): Cpu & { agentPids: Set<number> } => {
  const out = {
    server: 0,
    agents: 0,
    scripts: 0,
    postgres: 0,
    bench: procStat(String(process.pid))?.own ?? 0,
    agentPids: new Set<number>(),
  };
  for (const p of serverTree(serverPid)) {
    if (p.pid === serverPid) {
      out.server += p.own;
      out.agents += p.children;
    } else if (p.cmd.includes("agent-image/dist/main.js")) {
      out.agentPids.add(p.pid);
      out.agents += p.own;
      out.scripts += p.children;
    } else if (p.cmd.includes("flow-spawner")) {
      // A worker's script spawner (its agent's child, alive as long as it): its scripts are its children.
      out.agents += p.own;
      out.scripts += p.children;
    } else if (p.cmd.includes("postgres")) out.postgres += p.own + p.children;
  }
  return out;
};

const counters = async (db: pg.Client): Promise<Counters> => {
  const { rows } = await db.query<{ commits: string; fsyncs: string | null }>(
    `select (select sum(xact_commit) from pg_stat_database) as commits,
            (select sum(fsyncs) from pg_stat_io where object = 'wal') as fsyncs`,
  );
  return { commits: Number(rows[0]!.commits), walFsyncs: Number(rows[0]!.fsyncs ?? 0) };
};

interface Burst {
  wallMs: number;
  submitMs: number;
  clientWallMs: number;
  failed: number;
  queueMs: number;
  execMs: number;
  commitsPerRun: number;
  fsyncsPerRun: number;
  /** CPU milliseconds per run by role. */
  cpu: BurstCpu;
}

/** Submits `RUNS` runs tagged `tag`, `IN_FLIGHT` at a time; answers when the last submit answered. */
const submitAll = async (server: TestServer, tag: string): Promise<void> => {
  let next = 0;
  const submitter = async (): Promise<void> => {
    while (next < RUNS) {
      next++;
      await api(server, "POST", "/runs", { kind: "script", source: SCRIPT, filename: "hi.sh", tags: [tag] });
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, submitter));
};

/** Polls until every run of the tag has ended (20 ms: cheap, and the figures come from the rows). */
const waitAllEnded = async (db: pg.Client, tag: string): Promise<{ polls: number }> => {
  for (let polls = 1; ; polls++) {
    const { rows } = await db.query<{ ended: string }>(
      `select count(*) as ended from runs where tags @> array[$1]::text[] and status in (${TERMINAL_STATUSES_SQL})`,
      [tag],
    );
    if (Number(rows[0]!.ended) >= RUNS) return { polls };
    await new Promise((r) => setTimeout(r, 20));
  }
};

const burstRows = async (db: pg.Client, tag: string) =>
  (
    await db.query<{ wall: number; failed: string; queue: number[]; exec: number[] }>(
      `select extract(epoch from max(finished_at) - min(created_at)) * 1000 as wall,
              count(*) filter (where status <> 'succeeded') as failed,
              array_agg(extract(epoch from started_at - created_at) * 1000) as queue,
              array_agg(extract(epoch from finished_at - started_at) * 1000) as exec
         from runs where tags @> array[$1]::text[]`,
      [tag],
    )
  ).rows[0]!;

const burst = async (server: TestServer, db: pg.Client, tag: string): Promise<Burst> => {
  const before = await counters(db);
  const cpu0 = cpuNow(server.process.pid!);
  const t0 = performance.now();
  await submitAll(server, tag);
  const submitMs = performance.now() - t0;
  const { polls } = await waitAllEnded(db, tag);
  const clientWallMs = performance.now() - t0;
  const after = await counters(db);
  const cpu1 = cpuNow(server.process.pid!);
  const r = await burstRows(db, tag);
  // The watcher's own polls and the counter reads are transactions too: not the server's.
  const commits = after.commits - before.commits - polls - 1;
  return {
    wallMs: Number(r.wall),
    submitMs,
    clientWallMs,
    failed: Number(r.failed),
    queueMs: median(r.queue.map(Number)),
    execMs: median(r.exec.map(Number)),
    commitsPerRun: commits / RUNS,
    fsyncsPerRun: (after.walFsyncs - before.walFsyncs) / RUNS,
    cpu: {
      server: ((cpu1.server - cpu0.server) * 1000) / RUNS,
      agents: ((cpu1.agents - cpu0.agents) * 1000) / RUNS,
      scripts: ((cpu1.scripts - cpu0.scripts) * 1000) / RUNS,
      postgres: ((cpu1.postgres - cpu0.postgres) * 1000) / RUNS,
      bench: ((cpu1.bench - cpu0.bench) * 1000) / RUNS,
      // An agent that exited took its scripts' CPU with it into the server's reaped children (counted as agents').
      split: [...cpu0.agentPids].every((pid) => cpu1.agentPids.has(pid)),
    },
  };
};

const report = (i: number, b: Burst, floorMs: number): void => {
  const rate = (RUNS / b.wallMs) * 1000;
  console.log(
    `  burst ${i + 1}: ${fmt(b.wallMs)} first submit to last succeeded, ${rate.toFixed(1)} runs/s, ${(b.wallMs / floorMs).toFixed(2)}x the floor` +
      `${b.failed ? `, ${b.failed} NOT succeeded` : ""} (${load()})`,
  );
  console.log(
    `           submits ${((RUNS / b.submitMs) * 1000).toFixed(1)}/s (${fmt(b.submitMs)} for ${RUNS}); client wall ${fmt(b.clientWallMs)};` +
      ` median queue ${fmt(b.queueMs)}, exec ${fmt(b.execMs)}; ${b.commitsPerRun.toFixed(1)} commits and ${b.fsyncsPerRun.toFixed(2)} WAL flushes per run`,
  );
  const c = b.cpu;
  console.log(
    `           CPU per run: server ${fmt(c.server)}, ` +
      (c.split
        ? `agents ${fmt(c.agents)} and their scripts ${fmt(c.scripts)}`
        : `agents and their scripts ${fmt(c.agents + c.scripts)} (not split: an agent was replaced during the burst)`) +
      `, Postgres ${fmt(c.postgres)},` +
      ` submitters ${fmt(c.bench)}; total ${fmt(c.server + c.agents + c.scripts + c.postgres + c.bench)}`,
  );
};

const main = async (): Promise<void> => {
  const server = await startBenchServer(AGENTS, NODE_OPTIONS ? { NODE_OPTIONS } : {});
  const db = await connectEmbedded(server.dataDir);
  try {
    // Warm-up: every agent of the pool started, the server's code paths compiled.
    await submitAll(server, "warmup");
    await waitAllEnded(db, "warmup");
    const before = await spawnFloor(RUNS);
    const floorBefore = before.ms;
    console.log(
      `${RUNS} runs of \`echo hi\`, ${IN_FLIGHT} submits in flight, ${AGENTS} agents; ${ROUNDS} bursts after a warm-up of ${RUNS}`,
    );
    console.log(
      `  process-spawn floor: ${RUNS} \`bash -c 'echo hi'\` one after another ${fmt(floorBefore)}, ${fmt(before.cpuMs)} of CPU each (${load()})`,
    );
    const walls: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const b = await burst(server, db, `burst-${i}`);
      report(i, b, floorBefore);
      walls.push(b.wallMs);
    }
    const after = await spawnFloor(RUNS);
    const floorAfter = after.ms;
    const floor = (floorBefore + floorAfter) / 2;
    const m = median(walls);
    console.log(`  process-spawn floor again: ${fmt(floorAfter)}, ${fmt(after.cpuMs)} of CPU each (${load()})`);
    console.log(
      `  median ${fmt(m)}, ${((RUNS / m) * 1000).toFixed(1)} runs/s, ${(m / floor).toFixed(2)}x the mean floor ${fmt(floor)}; target < 2.5 s (80 runs/s, ~2.5x the floor)`,
    );
  } finally {
    await db.end();
    await server.stop();
  }
};

await main();
