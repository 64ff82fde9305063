/**
 * What every benchmark needs: a real `flow server` on the embedded Postgres (as `npm start` runs
 * it), submits over HTTP, and the server's own timestamps for a run's start and end.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { request } from "undici";
import { isTerminalStatus } from "@flowsvc/core";
import { startTestServer, type TestServer } from "@flowsvc/test/support/server";

export interface BenchRun {
  id: string;
  status: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  output: Record<string, unknown> | null;
  error: string | null;
}

export const startBenchServer = (agents = 4, env: Record<string, string> = {}): Promise<TestServer> =>
  startTestServer({ embedded: true, agents, leaseMs: 15_000, env });

const scoped = "/api/v1/orgs/default/projects/default";

export const api = async <T>(server: TestServer, method: "GET" | "POST" | "PUT", path: string, body?: unknown): Promise<T> => {
  const res = await request(`${server.url}${scoped}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? null : JSON.stringify(body),
  });
  const text = await res.body.text();
  if (res.statusCode >= 300) throw new Error(`${method} ${path}: HTTP ${res.statusCode} ${text}`);
  return JSON.parse(text) as T;
};

export const submitScript = async (
  server: TestServer,
  filename: string,
  source: string,
  env: Record<string, string> = {},
): Promise<string> => (await api<{ id: string }>(server, "POST", "/runs", { kind: "script", source, filename, env })).id;

/** Submits a graph document (`flow submit graph.json`'s body) and answers the run id. */
export const submitGraph = async (server: TestServer, filename: string, source: string, input: unknown = {}): Promise<string> =>
  (await api<{ id: string }>(server, "POST", "/runs", { as: "graph", source, filename, input })).id;

/** Waits for the run to end (polling the API every 5 ms: cheap, and finer than what it measures). */
export const waitForRun = async (server: TestServer, id: string, timeoutMs = 300_000): Promise<BenchRun> => {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const run = await api<BenchRun>(server, "GET", `/runs/${id}`);
    if (isTerminalStatus(run.status)) return run;
    if (Date.now() > end) throw new Error(`run ${id} still ${run.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

/**
 * Waits for the run to end the way `flow follow` does: its log stream ends when the run does
 * (woken by the server's NOTIFY), then answers the run. Polling every 5 ms instead costs the
 * server five queries a poll: on 2 loaded cores that was more of its CPU than the 40 steps of
 * sequential-40 it measured.
 */
export const followRun = async (server: TestServer, id: string): Promise<BenchRun> => {
  const res = await request(`${server.url}${scoped}/runs/${id}/log?follow=1`, { headers: { authorization: `Bearer ${server.token}` } });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`GET /runs/${id}/log: HTTP ${res.statusCode} ${text}`);
  const run = await api<BenchRun>(server, "GET", `/runs/${id}`);
  if (!isTerminalStatus(run.status)) throw new Error(`run ${id} is ${run.status} after its log ended`);
  return run;
};

/** Submit-to-finish in milliseconds, from the server's own created_at and finished_at. */
export const wallMs = (run: BenchRun): number => new Date(run.finished_at!).getTime() - new Date(run.created_at).getTime();

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

export const percentile = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

export const fmt = (ms: number): string =>
  ms < 10 ? `${ms.toFixed(2)} ms` : ms < 1000 ? `${ms.toFixed(1)} ms` : `${(ms / 1000).toFixed(2)} s`;

/** The host's load averages (`uptime`), printed beside figures: the host is shared and noisy. */
export const hostLoad = (): string =>
  execFileSync("uptime")
    .toString()
    .trim()
    .replace(/.*(load average)/, "$1");

/** CPU time (ms, user + system, reaped children included) of a server's process tree, by part. */
export interface TreeCpu {
  server: number;
  agents: number;
  postgres: number;
  other: number;
}

const CLOCK_TICK_MS = 10; // USER_HZ is 100 on Linux

/** Reads /proc: the server process, its agents (node), Postgres and anything else below it. */
export const treeCpu = (rootPid: number): TreeCpu => {
  const procs = new Map<number, { ppid: number; ticks: number; comm: string }>();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, "utf8");
      const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
      const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
      procs.set(Number(d), { ppid: Number(f[1]), ticks, comm: st.slice(st.indexOf("(") + 1, st.lastIndexOf(")")) });
    } catch {
      // gone meanwhile
    }
  }
  const out: TreeCpu = { server: (procs.get(rootPid)?.ticks ?? 0) * CLOCK_TICK_MS, agents: 0, postgres: 0, other: 0 };
  const walk = (pid: number): void => {
    for (const [id, p] of procs) {
      if (p.ppid !== pid) continue;
      const part = p.comm === "postgres" ? "postgres" : p.comm === "node" ? "agents" : "other";
      out[part] += p.ticks * CLOCK_TICK_MS;
      walk(id);
    }
  };
  walk(rootPid);
  return out;
};

/** CPU per unit between two readings, e.g. "server 8.1  agents 5.2  postgres 3.4 ms". */
export const cpuPer = (before: TreeCpu, after: TreeCpu, units: number): string =>
  (["server", "agents", "postgres"] as const).map((k) => `${k} ${((after[k] - before[k]) / units).toFixed(1)}`).join("  ") + " ms";
