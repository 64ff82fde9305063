/**
 * The deployables' health and metrics server, a port of its own that no Ingress routes to: the
 * controller's FLOWSVC_HEALTH_PORT and flowsvc-ingest's FLOWSVC_METRICS_PORT. `/healthz` (the
 * process answers, no I/O), `/readyz` (Postgres answers) and `/metrics` (the process's metrics in
 * Prometheus's text format: its Postgres pool, the queue, the process, and in ingest the app's HTTP
 * answers, hook deliveries and step records, since ingest passes its app's registry;
 * store/src/metrics.ts). No token, as kubelet probes and scrapers expect; nothing in it names a run,
 * a hook or a secret.
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import type { Pool } from "pg";
import { ServiceMetrics } from "@flowsvc/store";

export interface HealthServerOptions {
  pool: Pool;
  host: string;
  port: number;
  logger: { info(obj: Record<string, unknown>, msg: string): void };
  /** The registry to scrape: the app's own where an app counts into one (ingest); unset: one for the pool. */
  metrics?: ServiceMetrics;
  /** The log line once listening (`<what> listening`, with its url); default "health server". */
  what?: string;
}

const serveMetrics = (metrics: ServiceMetrics, res: ServerResponse): void => {
  metrics.scrape().then(
    (text) => void res.writeHead(200, { "content-type": metrics.contentType, "cache-control": "no-store" }).end(text),
    () => void res.writeHead(503, { "content-type": "text/plain" }).end("metrics could not be collected\n"),
  );
};

export const startHealthServer = async (o: HealthServerOptions): Promise<Server> => {
  const metrics = o.metrics ?? new ServiceMetrics({ pool: o.pool });
  const server = createServer((req, res) => {
    const reply = (code: number, body: object): void =>
      void res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (req.url === "/healthz") return reply(200, { ok: true });
    if (req.url === "/metrics") return serveMetrics(metrics, res);
    if (req.url !== "/readyz") return reply(404, { error: { code: "not_found", message: "GET /healthz, /readyz or /metrics" } });
    o.pool.query("select 1").then(
      () => reply(200, { ok: true }),
      () => reply(503, { ok: false, error: { code: "unavailable", message: "postgres does not answer" } }),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host, resolve);
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : o.port;
  const host = o.host.includes(":") ? `[${o.host}]` : o.host;
  o.logger.info({ port, url: `http://${host}:${port}` }, `${o.what ?? "health server"} listening`);
  return server;
};
