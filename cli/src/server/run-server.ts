import { once } from "node:events";
import { chmod } from "node:fs/promises";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pino from "pino";
import { FlowError, redactSecretQuery } from "@flowsvc/core";
import {
  Keyring,
  ServiceMetrics,
  createPgResourceStore,
  createPool,
  endPool,
  migrate,
  startEmbeddedPostgres,
  startListener,
  stopPostgresSync,
  type EmbeddedPostgres,
} from "@flowsvc/store";
import {
  AccountRenewalLoop,
  Dispatcher,
  GraphDriver,
  LocalLauncher,
  TimerLoop,
  createEgressAgent,
  sweepAgentWorkdirs,
  type AgentUser,
} from "@flowsvc/controller";
import { setConnectorBaseUrls } from "@flowsvc/controller/graph/nodes/connector";
import { setForgeBaseUrls } from "@flowsvc/controller/graph/nodes/workflow";
import { buildApp } from "@flowsvc/ingest";
import { readCliConfig, writeCliConfig } from "../cli-config.js";
import { bootstrap, localMasterKey } from "./bootstrap.js";
import { makeDataDir } from "./data-dir.js";
import type { ServerConfig } from "./config.js";
import type { AgentPaths } from "./agent-runtime.js";
import { prepareLocalAgents } from "./local-agents.js";
import { printBanner } from "./print-banner.js";

export interface RunningServer {
  url: string;
  /** Clean stop: agents, HTTP, listener, pool, then Postgres. */
  stop(): Promise<void>;
  /** Emergency stop (a second Ctrl-C): still never leaves an embedded Postgres behind. */
  stopNow(): void;
}

const LOCAL_AGENT_CAPABILITY = "polyglot";

const redactUrl = (url: unknown): unknown => (typeof url === "string" ? redactSecretQuery(url) : url);

const agentPaths = (): AgentPaths => {
  const agentIndex = fileURLToPath(import.meta.resolve("@flowsvc/agent"));
  const agentRoot = dirname(dirname(agentIndex));
  return { agentMain: join(agentRoot, "dist", "main.js"), agentIndex, clientDir: join(agentRoot, "bin") };
};

/** How often the working directories a previous server's agents still use are looked at again. */
const STALE_SWEEP_MS = 5_000;

/**
 * A killed server's agents finish their jobs before they exit; their working directories go when
 * no process works in them any more. Answers the cleanup that stops the sweeping.
 */
const sweepUntilFinished = (
  workRoot: string,
  names: string[],
  user: AgentUser | undefined,
  log: (obj: Record<string, unknown>, msg: string) => void,
): (() => Promise<void>) => {
  let left = names;
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    sweepAgentWorkdirs(workRoot, left, user)
      .then(
        (rest) => {
          if (rest.length < left.length)
            log({ removed: left.filter((n) => !rest.includes(n)) }, "removed the working directories of a previous server's agents");
          left = rest;
          if (left.length === 0) clearInterval(timer);
        },
        (err: unknown) => log({ err }, "could not remove a previous server's working directories"),
      )
      .finally(() => (busy = false));
  }, STALE_SWEEP_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    return Promise.resolve();
  };
};

/** Why the listen failed, as a config error, for the errors a setting causes; undefined for any other. */
const listenProblem = (err: NodeJS.ErrnoException, config: Pick<ServerConfig, "host" | "port">): FlowError | undefined => {
  const { host, port } = config;
  const hostHint = "pass --host (FLOWSVC_HOST) an address of this machine: 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)";
  switch (err.code) {
    case "EADDRINUSE":
      return new FlowError("config", `port ${port} on ${host} is already in use`, { hint: "stop the other process or pass --port <n>" });
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_FAIL":
      return new FlowError("config", `cannot listen on --host ${host}: no such host name (${err.code})`, { hint: hostHint });
    case "EADDRNOTAVAIL":
      return new FlowError("config", `cannot listen on --host ${host}: it is not an address of this machine`, { hint: hostHint });
    case "EACCES":
      return new FlowError("config", `port ${port} on ${host} needs more privileges than this user has (ports below 1024 need root)`, {
        hint: "pass --port 1024 or above (FLOWSVC_PORT)",
      });
    default:
      return undefined;
  }
};

/**
 * What the listen would refuse (a port in use, a host that is not ours, a port that needs root) is
 * refused before anything starts, by a probe listen on the same host and port. Found only at the
 * real listen, after the embedded Postgres and the first start's bootstrap, it had used up the
 * first start (the admin token minted, the CLI never logged in: the next start found nothing to log
 * in with) and printed the listener's lost connection as a JSON line. Any other error is left to
 * the listen itself.
 */
const assertCanListen = async (config: Pick<ServerConfig, "host" | "port">): Promise<void> => {
  const probe = createServer();
  const err = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    probe.once("error", resolve);
    probe.listen({ host: config.host, port: config.port, exclusive: true }, () => resolve(undefined));
  });
  if (probe.listening) await new Promise<void>((resolve) => probe.close(() => resolve()));
  const problem = err && listenProblem(err, config);
  if (problem) throw problem;
};

/** Listens on the configured host and port; what a setting causes (a port in use, a host that is not ours) is a config error that says so. */
export const listenOn = async (
  app: { listen(opts: { host: string; port: number }): Promise<string> },
  config: Pick<ServerConfig, "host" | "port">,
): Promise<string> => {
  try {
    return await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    throw listenProblem(err as NodeJS.ErrnoException, config) ?? err;
  }
};

/**
 * The first start's admin token is written to the CLI's config, unless that config already points
 * at another server. Answers whether it was written.
 */
const saveLocalLogin = async (path: string, url: string, token: string | undefined): Promise<boolean> => {
  if (!token) return false;
  const current = await readCliConfig(path).catch(() => undefined);
  if (current && current.url !== url) return false;
  await writeCliConfig(path, { url, token, project: "default/default" });
  return true;
};

/** The banner's agents line: each pool's count and capabilities, and the user they run as. */
const describeAgents = (pools: ReadonlyArray<{ capabilities: readonly string[]; count: number }>, runAs: AgentUser | undefined): string =>
  pools.map((p) => (p.capabilities.length ? `${p.count} (${p.capabilities.join(",")})` : String(p.count))).join(" + ") +
  (runAs ? ` local, running as ${runAs.name}` : " local");

/**
 * The all-in-one local mode: Postgres (embedded unless FLOWSVC_DATABASE_URL), migrations, the
 * HTTP API, the dispatcher and a local launcher of agent processes, in one process.
 * Stops in the reverse order; Postgres last.
 */
export const runServer = async (config: ServerConfig): Promise<RunningServer> => {
  await makeDataDir(config.dataDir);
  const logPath = join(config.dataDir, "server.log");
  await chmod(logPath, 0o600).catch(() => undefined); // made 0644 by servers before 0600 was asked for
  // Open before anything can end the process: pino flushes this file synchronously at exit, and
  // sonic-boom throws ("not ready yet") for a file still opening, which a start refused at once
  // (a data dir the agent user cannot reach) printed as a bug after its own clear error.
  const logFile = pino.destination({ dest: logPath, mkdir: true, sync: false, mode: 0o600 });
  await once(logFile, "ready");
  const logger = pino(
    {
      level: config.logLevel,
      redact: ["req.headers.authorization", "headers.authorization", "*.token", "*.secret", "*.value"],
      // A hook's `?secret=` (however percent-encoded) never reaches the log with a URL.
      serializers: { url: redactUrl, req: (req: { method?: string; url?: unknown }) => ({ method: req.method, url: redactUrl(req.url) }) },
    },
    pino.multistream([
      { level: config.logLevel, stream: logFile },
      { level: "warn", stream: process.stderr },
    ]),
  );
  const log = (obj: Record<string, unknown>, msg: string): void => logger.info(obj, msg);
  const cleanups: Array<() => Promise<void>> = [];
  let postgresPid: number | undefined;
  const stopAll = async (): Promise<void> => {
    for (const fn of cleanups.splice(0).reverse()) {
      try {
        await fn();
      } catch (err) {
        logger.error({ err }, "error during shutdown");
      }
    }
    logger.flush();
  };

  try {
    await assertCanListen(config);
    // Then: a bad agent user or an unreadable checkout stops the start before anything runs, and
    // the working directories a killed server left are gone before its successor's agents start.
    const workRoot = join(config.dataDir, "agents");
    const agentSetup = await prepareLocalAgents({
      dataDir: config.dataDir,
      workRoot,
      userName: config.agentUser,
      paths: agentPaths(),
      baseEnv: config.agentEnv,
      log: (m) => logger.info(m),
    });
    const { agentMain, clientDir } = agentSetup.paths;
    const { stale } = agentSetup;
    if (stale.removed.length || stale.inUse.length)
      logger.info(stale, "working directories of a previous server's agents: removed, and left while its agents finish");
    if (stale.inUse.length) cleanups.push(sweepUntilFinished(workRoot, stale.inUse, agentSetup.runAs, log));

    let databaseUrl = config.databaseUrl;
    let embedded: EmbeddedPostgres | undefined;
    if (!databaseUrl) {
      embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, log: (m) => logger.info({ postgres: m }, "embedded postgres") });
      cleanups.push(() => embedded!.stop());
      postgresPid = embedded.pid;
      databaseUrl = embedded.localUrl;
    }
    const pool = createPool(databaseUrl, { max: 20, applicationName: "flowsvc", log: (m: string) => logger.warn(m) });
    cleanups.push(() => endPool(pool));
    await migrate(pool, (m) => logger.info(m));

    const master = embedded
      ? await localMasterKey(config.dataDir, config.masterKey)
      : { key: config.masterKey!, generated: false, path: undefined };
    const keyring = await Keyring.create(pool, master.key);
    const boot = await bootstrap(pool, keyring, config.dataDir);
    await keyring.verify(boot.orgId);

    const listener = startListener(databaseUrl, (msg, err) => logger.warn({ err }, msg));
    cleanups.push(() => listener.close());

    // Local mode: resource writes go straight to Postgres (kubernetes mode writes the custom resources).
    const resources = createPgResourceStore(pool, keyring);
    // One registry for the process: the app's counters and the local agent pools, scraped at /metrics.
    const metrics = new ServiceMetrics({ pool });
    // The launchers start after the server listens (their agents need its URL): `flow agents ls` reads them once they are.
    const roster: { launchers: LocalLauncher[] } = { launchers: [] };
    const localAgents = () => roster.launchers.flatMap((l) => l.agents());
    // The launchers' dispatcher, made once the server listens (see below): emits hand it their new jobs.
    const events = { dispatcher: undefined as Dispatcher | undefined };
    const deps = {
      pool,
      keyring,
      resources,
      listener,
      publicUrl: config.publicUrl,
      leaseMs: config.leaseMs,
      metrics,
      localAgents,
      dispatchSlots: () => events.dispatcher,
      accounts: config.accounts,
    };
    const app = buildApp(deps, logger);
    const address = await listenOn(app, config);
    cleanups.push(() => app.close());
    const url = address.replace("://[::1]", "://localhost");

    // The launcher reports agent exits to the dispatcher (`events`), which needs the launcher: tie the knot.
    // The default agents run scripts with this machine's runtimes, which is what `polyglot` means
    // (script handlers need it): a fresh `npm start` runs handlers without further flags.
    const pools = [{ capabilities: [LOCAL_AGENT_CAPABILITY], count: config.agents }, ...config.agentPools];
    const launchers = pools.map(
      (p) =>
        new LocalLauncher({
          agentMain,
          clientDir,
          agents: p.count,
          capabilities: p.capabilities,
          workRoot,
          runAs: agentSetup.runAs,
          serverUrl: url,
          baseEnv: agentSetup.env,
          maxJobsPerAgent: config.agentMaxJobs,
          idleMs: config.agentIdleMs,
          scriptSpawner: config.agentSpawner === "on",
          // At debug the agents' own lines (each script's pid, say) join the server's.
          agentLogLevel: config.logLevel === "debug" || config.logLevel === "trace" ? "info" : "warn",
          log,
          events: {
            agentExited: (req) => events.dispatcher?.agentExited(req),
            launchFailed: (req, reason, retryAfterMs) => events.dispatcher?.launchFailed(req, reason, retryAfterMs),
            slotFreed: () => events.dispatcher?.slotFreed(),
          },
        }),
    );
    metrics.trackAgentPools(launchers);
    roster.launchers = launchers;
    const d = new Dispatcher({
      pool,
      listener,
      launchers,
      leaseMs: config.leaseMs,
      maxAttempts: 5,
      publicUrl: config.publicUrl,
      logger,
    });
    events.dispatcher = d;
    setConnectorBaseUrls(config.connectorBaseUrls);
    setForgeBaseUrls(config.connectorBaseUrls);
    const timers = new TimerLoop(pool, logger);
    const egress = createEgressAgent(config.httpEgress);
    const graphs = new GraphDriver({ pool, keyring, listener, logger, publicUrl: config.publicUrl, egress });
    const renewal = new AccountRenewalLoop({ pool, keyring, providers: config.accounts.providers, log: logger });
    cleanups.push(async () => {
      timers.stop();
      graphs.stop();
      await renewal.stop();
      d.stop();
      await Promise.all(launchers.map((l) => l.stop()));
      await d.drain();
      await graphs.drain();
      await egress.close();
    });
    await d.start();
    timers.start();
    graphs.start();
    renewal.start();

    const cliConfig = { path: config.cliConfigPath, written: await saveLocalLogin(config.cliConfigPath, url, boot.token) };
    printBanner({
      url,
      dataDir: config.dataDir,
      database: embedded ? `embedded Postgres on 127.0.0.1:${embedded.port}` : "external (FLOWSVC_DATABASE_URL)",
      agents: describeAgents(pools, agentSetup.runAs),
      token: boot.token,
      cliConfig,
      masterKeyGenerated: master.generated ? master.path : undefined,
    });
    logger.info({ url }, "flowsvc started");
    return {
      url,
      stop: stopAll,
      stopNow: () => {
        if (postgresPid) stopPostgresSync(postgresPid, 5000);
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
};
