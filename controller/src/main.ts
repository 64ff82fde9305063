#!/usr/bin/env node
/**
 * flowsvc-controller: the controller deployable (issue 16, item 6). It reads its configuration once
 * (config.ts), migrates Postgres, serves /healthz and /readyz on FLOWSVC_HEALTH_PORT, and campaigns
 * for the Lease: only the leader runs the dispatcher, the timers, the agent Pod launcher and the
 * reconcilers. A leader that cannot renew within renewDeadline stops them at once and exits 1 (its
 * Pod restarts it as a candidate); SIGTERM stops them, releases the Lease and exits 0.
 */
import type { Server } from "node:http";
import pino, { type Logger } from "pino";
import { FlowError } from "@flowsvc/core";
import { Keyring, createPool, migrate, startListener, type Listener } from "@flowsvc/store";
import type { Pool } from "pg";
import { loadControllerConfig, type ControllerConfig } from "./config.js";
import { Dispatcher } from "./dispatcher.js";
import { startHealthServer } from "./health-server.js";
import { TimerLoop } from "./timers.js";
import { AccountRenewalLoop } from "./accounts/renewal-loop.js";
import { kubeClients, type KubeClients } from "./kube/client.js";
import { LeaderElector } from "./kube/leader.js";
import { PodLauncher } from "./kube/pod-launcher.js";
import { startReconcilers } from "./kube/reconcilers.js";
import { createPgResourceStore } from "@flowsvc/store";

interface Shared {
  config: ControllerConfig;
  logger: Logger;
  pool: Pool;
  keyring: Keyring;
  listener: Listener;
  clients: KubeClients;
}

interface Leading {
  /** Stops dispatching now (synchronous: nothing is claimed after it returns). */
  halt(): void;
  /** halt(), then waits for the launcher's watch and the dispatcher's pending requeues. */
  stop(): Promise<void>;
}

/** What only the leader runs. */
const startLeading = async (s: Shared): Promise<Leading> => {
  const { config, logger, pool, listener, clients } = s;
  // The reconcilers (controller/src/kube/reconcilers.ts): CRs -> Postgres, status back, and the
  // FlowRun mirror, which is the launcher's RunOwners.
  const reconcilers = startReconcilers({
    kc: clients.kc,
    pool,
    keyring: s.keyring,
    listener,
    store: createPgResourceStore(pool, s.keyring),
    log: logger,
    publicUrl: config.publicUrl,
    watchNamespaces: config.file.watchNamespaces,
    runTtlSecondsAfterFinished: config.file.runTtlSecondsAfterFinished,
  });
  const events = { dispatcher: undefined as Dispatcher | undefined };
  const launcher = new PodLauncher({
    clients,
    owners: reconcilers.runOwners,
    settings: config.file.agent,
    serverUrl: config.file.agentServerUrl,
    watchNamespaces: config.file.watchNamespaces,
    leaseMs: config.leaseMs,
    identity: config.podName,
    logger,
    events: {
      agentExited: (req, code, signal) => events.dispatcher?.agentExited(req, code, signal),
      launchFailed: (req, reason, retryAfterMs) => events.dispatcher?.launchFailed(req, reason, retryAfterMs),
      slotFreed: () => events.dispatcher?.nudge(),
    },
  });
  const dispatcher = new Dispatcher({
    pool,
    listener,
    launchers: [launcher],
    leaseMs: config.leaseMs,
    maxAttempts: 5,
    publicUrl: config.publicUrl,
    logger,
  });
  events.dispatcher = dispatcher;
  const timers = new TimerLoop(pool, logger);
  const renewal = new AccountRenewalLoop({
    pool,
    keyring: s.keyring,
    providers: config.accounts.providers,
    holder: config.podName,
    log: logger,
  });
  await dispatcher.start(); // adopts the agent Pods in flight first
  timers.start();
  renewal.start();

  logger.info({ identity: config.podName }, "leading: reconcilers, dispatcher, timers and agent Pod launcher started");
  const halt = (): void => {
    dispatcher.stop();
    timers.stop();
    void renewal.stop();
  };
  return {
    halt,
    stop: async () => {
      halt();
      await launcher.stop();
      await dispatcher.drain();
      await reconcilers.stop();
    },
  };
};

/** /healthz, /readyz and /metrics on FLOWSVC_HEALTH_PORT (health-server.ts). */
const startHealth = (s: Pick<Shared, "config" | "logger" | "pool">): Promise<Server> =>
  startHealthServer({ pool: s.pool, host: s.config.healthHost, port: s.config.healthPort, logger: s.logger });

const run = async (config: ControllerConfig, logger: Logger): Promise<void> => {
  const pool = createPool(config.databaseUrl, { max: 10, applicationName: "flowsvc-controller", log: (m: string) => logger.warn(m) });
  await migrate(pool, (m) => logger.info(m));
  const keyring = await Keyring.create(pool, config.masterKey);
  const listener = startListener(config.databaseUrl, (msg, err) => logger.warn({ err }, msg));
  const shared: Shared = { config, logger, pool, keyring, listener, clients: kubeClients() };
  const health = await startHealth(shared);
  let leading: Leading | undefined;
  let starting: Promise<void> | undefined;
  const elector = new LeaderElector({
    coordination: shared.clients.coordination,
    namespace: config.podNamespace,
    identity: config.podName,
    settings: config.file.leaderElection,
    logger,
    onStartedLeading: () => (starting = startLeading(shared).then((l) => void (leading = l))),
    onStoppedLeading: () => {
      leading?.halt();
      logger.flush();
      process.exit(1);
    },
  });
  if (config.file.leaderElection.enabled) elector.start();
  else await (starting = startLeading(shared).then((l) => void (leading = l)));

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping");
    void (async () => {
      await starting?.catch(() => undefined);
      await leading?.stop();
      await elector.stop();
      health.close();
      await listener.close();
      await pool.end();
      logger.flush();
      process.exit(0);
    })();
  };
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => shutdown(signal));
};

const main = async (): Promise<void> => {
  let config: ControllerConfig;
  try {
    config = loadControllerConfig();
  } catch (err) {
    process.stderr.write(`flowsvc-controller: ${err instanceof FlowError ? err.message : String(err)}\n`);
    process.exit(2);
  }
  const logger = pino(
    { level: config.logLevel, base: { service: "flowsvc-controller" }, redact: ["*.token", "*.secret", "*.value"] },
    pino.destination(2),
  );
  await run(config, logger).catch((err: unknown) => {
    logger.fatal({ err }, "the controller could not start");
    logger.flush();
    process.exit(1);
  });
};

await main();
