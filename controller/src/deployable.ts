/**
 * The start-up both deployables share (flowsvc-controller, flowsvc-ingest; issue 16 item 6): read
 * the configuration once (a bad value: `<bin>: <message>` on stderr, exit 2), a levelled pino logger
 * on stderr, Postgres migrated, the keyring and the LISTEN connection, an optional health server
 * (health-server.ts: /healthz, /readyz, /metrics), and SIGTERM/SIGINT handling (the
 * deployable's own stop, then the health server, the listener and the pool; exit 0). A start that
 * fails is logged at fatal and exits 1. Each main.ts says only what is its own.
 */
import pino, { type Logger, type LoggerOptions } from "pino";
import type { Pool } from "pg";
import { FlowError } from "@flowsvc/core";
import { Keyring, anyKeyedOrg, createPool, endPool, migrate, startListener, type Listener } from "@flowsvc/store";
import type { ServiceConfig } from "./config.js";
import { startHealthServer } from "./health-server.js";

/** The health and metrics server (health-server.ts), for a deployable that starts one of its own (flowsvc-ingest's metrics port). */
export { startHealthServer, type HealthServerOptions } from "./health-server.js";

/** What the shared start-up made, for the deployable's own start. */
export interface Started<C extends ServiceConfig> {
  config: C;
  logger: Logger;
  pool: Pool;
  keyring: Keyring;
  listener: Listener;
}

export interface Deployable<C extends ServiceConfig> {
  /** The bin's name: the logger's `service` and the prefix of a refused configuration. */
  name: string;
  /** Reads and checks the configuration (throws a FlowError naming the variable). Called once. */
  loadConfig: () => C;
  /** Postgres pool size. */
  poolMax: number;
  /** Logger options beyond the level and `service` (redactions, serializers). */
  logger?: Omit<LoggerOptions, "level" | "base">;
  /**
   * Serve /healthz, /readyz and /metrics on this address with a registry of its own (the controller;
   * ingest starts its metrics server itself, with its app's registry).
   */
  health?: (config: C) => { host: string; port: number };
  /** The deployable's own start; answers how to stop it (SIGTERM), or fails the start. */
  start: (s: Started<C>) => Promise<{ stop: () => Promise<void> }>;
}

const loadOrExit = <C extends ServiceConfig>(d: Deployable<C>): C => {
  try {
    return d.loadConfig();
  } catch (err) {
    process.stderr.write(`${d.name}: ${err instanceof FlowError ? err.message : String(err)}\n`);
    process.exit(2);
  }
};

const startShared = async <C extends ServiceConfig>(d: Deployable<C>, config: C, logger: Logger): Promise<Started<C>> => {
  const pool = createPool(config.databaseUrl, { max: d.poolMax, applicationName: d.name, log: (m: string) => logger.warn(m) });
  await migrate(pool, (m) => logger.info(m));
  const keyring = await Keyring.create(pool, config.masterKey);
  // A master key this database's org keys were not wrapped with fails here, as flow server's does,
  // not later at every seal and open while the Pod reports ready.
  const org = await anyKeyedOrg(pool);
  if (org !== undefined) await keyring.verify(org);
  const listener = startListener(config.databaseUrl, (msg, err) => logger.warn({ err }, msg));
  return { config, logger, pool, keyring, listener };
};

/** Stops on the first SIGTERM or SIGINT: the deployable, then what startShared made; exits 0. */
const onSignals = (s: Started<ServiceConfig>, stops: Array<() => Promise<void> | void>): void => {
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    s.logger.info({ signal }, "stopping");
    void (async () => {
      for (const stop of stops) await stop();
      await s.listener.close();
      await endPool(s.pool);
      s.logger.flush();
      process.exit(0);
    })();
  };
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => shutdown(signal));
};

/** Runs a deployable: the shared start-up, then its own; returns once it is up (signals stop it). */
export const runDeployable = async <C extends ServiceConfig>(d: Deployable<C>): Promise<void> => {
  const config = loadOrExit(d);
  const logger = pino({ ...d.logger, level: config.logLevel, base: { service: d.name } }, pino.destination(2));
  try {
    const s = await startShared(d, config, logger);
    const health = d.health ? await startHealthServer({ pool: s.pool, ...d.health(config), logger }) : undefined;
    const own = await d.start(s);
    onSignals(s, [own.stop, () => void health?.close()]);
  } catch (err) {
    logger.fatal({ err }, `${d.name} could not start`);
    logger.flush();
    process.exit(1);
  }
};
