#!/usr/bin/env node
/**
 * flowsvc-ingest: the stateless deployable (issue 16, item 6): the user API, hook ingest and the
 * agent API, with /healthz (liveness, no I/O) and /readyz (Postgres answers) from its app on
 * FLOWSVC_PORT, and `/metrics` on FLOWSVC_METRICS_PORT only (the controller's health server,
 * scraping the app's own registry), a port the chart's Ingress does not route to. It runs no
 * dispatcher, timer or reconciler (the leader controller does), so it scales with replicas. The
 * start-up it shares with the controller (@flowsvc/controller/deployable) reads its configuration
 * once (config.ts), migrates Postgres and handles the signals: SIGTERM closes the app and the
 * metrics server, then Postgres.
 */
import { redactSecretQuery } from "@flowsvc/core";
import { ServiceMetrics, createPgResourceStore } from "@flowsvc/store";
import { runDeployable, startHealthServer } from "@flowsvc/controller/deployable";
import { KubeResourceStore, loadKubeConfig } from "@flowsvc/controller/kube";
import { buildApp } from "./app.js";
import { loadIngestConfig, type IngestConfig } from "./config.js";

const redactUrl = (url: unknown): unknown => (typeof url === "string" ? redactSecretQuery(url) : url);

await runDeployable<IngestConfig>({
  name: "flowsvc-ingest",
  loadConfig: () => loadIngestConfig(),
  poolMax: 20,
  logger: {
    redact: ["req.headers.authorization", "headers.authorization", "*.token", "*.secret", "*.value"],
    serializers: { url: redactUrl, req: (req: { method?: string; url?: unknown }) => ({ method: req.method, url: redactUrl(req.url) }) },
  },
  start: async ({ config, logger, pool, keyring, listener }) => {
    // Kubernetes mode: resource writes go to Postgres and to their custom resource (kube-resource-store.ts).
    const resources = new KubeResourceStore(loadKubeConfig(), createPgResourceStore(pool, keyring));
    // One registry: what the app's routes count is what the metrics port answers.
    const metrics = new ServiceMetrics({ pool });
    const { publicUrl, leaseMs, accounts } = config;
    const app = buildApp({ pool, keyring, listener, resources, publicUrl, leaseMs, accounts, metrics, metricsRoute: false }, logger);
    const metricsServer = await startHealthServer({ pool, metrics, host: config.host, port: config.metricsPort, logger, what: "metrics" });
    const url = await app.listen({ host: config.host, port: config.port });
    logger.info({ url }, "flowsvc-ingest listening");
    const closeMetrics = () => new Promise<void>((resolve) => metricsServer.close(() => resolve()));
    return { stop: () => Promise.all([app.close(), closeMetrics()]).then(() => undefined) };
  },
});
