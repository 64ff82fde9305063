#!/usr/bin/env node
/**
 * flowsvc-ingest: the stateless deployable (issue 16, item 6): the user API, hook ingest and the
 * agent API, with /healthz (liveness, no I/O) and /readyz (Postgres answers). It runs no dispatcher,
 * timer or reconciler (the leader controller does), so it scales with replicas. Reads its
 * configuration once (config.ts); SIGTERM closes the server, then Postgres.
 */
import pino from "pino";
import { FlowError, redactSecretQuery } from "@flowsvc/core";
import { Keyring, createPgResourceStore, createPool, migrate, startListener } from "@flowsvc/store";
import { KubeResourceStore, loadKubeConfig } from "@flowsvc/controller/kube";
import { buildApp } from "./app.js";
import { loadIngestConfig, type IngestConfig } from "./config.js";

const redactUrl = (url: unknown): unknown => (typeof url === "string" ? redactSecretQuery(url) : url);

const run = async (config: IngestConfig, logger: pino.Logger): Promise<void> => {
  const pool = createPool(config.databaseUrl, { max: 20, applicationName: "flowsvc-ingest", log: (m: string) => logger.warn(m) });
  await migrate(pool, (m) => logger.info(m));
  const keyring = await Keyring.create(pool, config.masterKey);
  const listener = startListener(config.databaseUrl, (msg, err) => logger.warn({ err }, msg));
  // Kubernetes mode: resource writes go to Postgres and to their custom resource (kube-resource-store.ts).
  const resources = new KubeResourceStore(loadKubeConfig(), createPgResourceStore(pool, keyring));
  const app = buildApp(
    { pool, keyring, listener, resources, publicUrl: config.publicUrl, leaseMs: config.leaseMs, accounts: config.accounts },
    logger,
  );
  const url = await app.listen({ host: config.host, port: config.port });
  logger.info({ url }, "flowsvc-ingest listening");
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping");
    void (async () => {
      await app.close();
      await listener.close();
      await pool.end();
      logger.flush();
      process.exit(0);
    })();
  };
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => shutdown(signal));
};

const main = async (): Promise<void> => {
  let config: IngestConfig;
  try {
    config = loadIngestConfig();
  } catch (err) {
    process.stderr.write(`flowsvc-ingest: ${err instanceof FlowError ? err.message : String(err)}\n`);
    process.exit(2);
  }
  const logger = pino(
    {
      level: config.logLevel,
      base: { service: "flowsvc-ingest" },
      redact: ["req.headers.authorization", "headers.authorization", "*.token", "*.secret", "*.value"],
      serializers: { url: redactUrl, req: (req: { method?: string; url?: unknown }) => ({ method: req.method, url: redactUrl(req.url) }) },
    },
    pino.destination(2),
  );
  await run(config, logger).catch((err: unknown) => {
    logger.fatal({ err }, "ingest could not start");
    logger.flush();
    process.exit(1);
  });
};

await main();
