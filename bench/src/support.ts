/**
 * What every benchmark needs: a real `flow server` on the embedded Postgres (as `npm start` runs
 * it), submits over HTTP, and the server's own timestamps for a run's start and end.
 */
import { request } from "undici";
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
    if (["succeeded", "failed", "cancelled"].includes(run.status)) return run;
    if (Date.now() > end) throw new Error(`run ${id} still ${run.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
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
