#!/usr/bin/env node
/**
 * flowsvc-controller: the controller deployable (issue 16, item 6). The start-up it shares with
 * ingest (deployable.ts) reads its configuration once (config.ts), migrates Postgres, serves /healthz
 * and /readyz on FLOWSVC_HEALTH_PORT and handles the signals; then it campaigns
 * for the Lease: only the leader runs the dispatcher, the timers, the agent Pod launcher and the
 * reconcilers. A leader that cannot renew within renewDeadline stops them at once and exits 1 (its
 * Pod restarts it as a candidate); SIGTERM stops them, releases the Lease and exits 0. Before it
 * campaigns, every replica makes sure the user admin exists (initial-admin.ts). `flowsvc-controller
 * admin-token` mints a new token for admin instead (admin-token.ts).
 */
import { loadControllerConfig, type ControllerConfig } from "./config.js";
import { runDeployable, type Started } from "./deployable.js";
import { Dispatcher } from "./dispatcher.js";
import { TimerLoop } from "./timers.js";
import { setConnectorBaseUrls } from "./graph/nodes/connector.js";
import { setForgeBaseUrls } from "./graph/nodes/workflow.js";
import { GraphDriver } from "./graph/driver.js";
import { createEgressAgent } from "./net/egress-agent.js";
import { AccountRenewalLoop } from "./accounts/renewal-loop.js";
import { kubeClients, type KubeClients } from "./kube/client.js";
import { LeaderElector } from "./kube/leader.js";
import { PodLauncher } from "./kube/pod-launcher.js";
import { AgentNetworkPolicies } from "./kube/agent-network-policies.js";
import { startReconcilers } from "./kube/reconcilers.js";
import { createPgResourceStore } from "@flowsvc/store";
import { ensureInitialAdmin } from "./initial-admin.js";
import { runAdminTokenCommand } from "./admin-token.js";

interface Shared extends Started<ControllerConfig> {
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
  const policySpec = config.file.agentNetworkPolicy;
  const launcher = new PodLauncher({
    clients,
    owners: reconcilers.runOwners,
    settings: config.file.agent,
    serverUrl: config.file.agentServerUrl,
    watchNamespaces: config.file.watchNamespaces,
    leaseMs: config.leaseMs,
    identity: config.podName,
    logger,
    ...(policySpec ? { networkPolicies: new AgentNetworkPolicies({ networking: clients.networking, spec: policySpec, logger }) } : {}),
    events: {
      agentExited: (req, code, signal) => events.dispatcher?.agentExited(req, code, signal),
      launchFailed: (req, reason, retryAfterMs, opts) => events.dispatcher?.launchFailed(req, reason, retryAfterMs, opts),
      slotFreed: () => events.dispatcher?.slotFreed(),
    },
  });
  setConnectorBaseUrls(config.connectorBaseUrls);
  setForgeBaseUrls(config.connectorBaseUrls);
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
  const egress = createEgressAgent(config.httpEgress);
  const graphs = new GraphDriver({ pool, keyring: s.keyring, listener, logger, publicUrl: config.publicUrl, egress });
  await dispatcher.start(); // adopts the agent Pods in flight first
  timers.start();
  graphs.start();
  renewal.start();

  logger.info({ identity: config.podName }, "leading: reconcilers, dispatcher, timers and agent Pod launcher started");
  const halt = (): void => {
    dispatcher.stop();
    timers.stop();
    graphs.stop();
    void renewal.stop();
  };
  return {
    halt,
    stop: async () => {
      halt();
      await launcher.stop();
      await dispatcher.drain();
      await graphs.drain();
      await egress.close();
      await reconcilers.stop();
    },
  };
};

const startController = async (s: Started<ControllerConfig>): Promise<{ stop: () => Promise<void> }> => {
  const { config, logger } = s;
  const shared: Shared = { ...s, clients: kubeClients() };
  // Every replica, leader or not: the first start makes the user admin and its token's Secret.
  const initialAdmin = config.file.initialAdmin;
  if (initialAdmin?.enabled)
    await ensureInitialAdmin({ pool: s.pool, core: shared.clients.core, namespace: config.podNamespace, settings: initialAdmin, logger });
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
  return {
    stop: async () => {
      await starting?.catch(() => undefined);
      await leading?.stop();
      await elector.stop();
    },
  };
};

// `flowsvc-controller admin-token [--revoke-others]`: the recovery path for a lost admin token.
if (process.argv[2] === "admin-token") process.exit(await runAdminTokenCommand(process.argv.slice(3)));

await runDeployable<ControllerConfig>({
  name: "flowsvc-controller",
  loadConfig: () => loadControllerConfig(),
  poolMax: 10,
  logger: { redact: ["*.token", "*.secret", "*.value"] },
  health: (config) => ({ host: config.healthHost, port: config.healthPort }),
  start: startController,
});
