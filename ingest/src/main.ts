#!/usr/bin/env node
/**
 * flowsvc-ingest: the stateless deployable (issue 16, item 6): the user API, hook ingest and the
 * agent API, with /healthz (liveness, no I/O) and /readyz (Postgres answers) from its app. It runs
 * no dispatcher, timer or reconciler (the leader controller does), so it scales with replicas. The
 * start-up it shares with the controller (@flowsvc/controller/deployable) reads its configuration
 * once (config.ts), migrates Postgres and handles the signals: SIGTERM closes the server, then Postgres.
 */
import { redactSecretQuery } from "@flowsvc/core";
import { createPgResourceStore } from "@flowsvc/store";
import { runDeployable } from "@flowsvc/controller/deployable";
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
    const app = buildApp(
      { pool, keyring, listener, resources, publicUrl: config.publicUrl, leaseMs: config.leaseMs, accounts: config.accounts },
      logger,
    );
    const url = await app.listen({ host: config.host, port: config.port });
    logger.info({ url }, "flowsvc-ingest listening");
    return { stop: () => app.close() };
  },
});
