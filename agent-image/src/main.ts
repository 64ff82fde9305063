/**
 * The agent's entry point: `node agent-image/dist/main.js`. Diagnostics go to stderr as JSON lines.
 *
 * One-job mode (the default; a Kubernetes Pod): started by a launcher once per job with
 * FLOW_SERVER_URL, FLOW_JOB_TOKEN_FILE (a Pod's mounted token Secret) or FLOW_JOB_TOKEN, FLOW_AGENT_ID (and optionally FLOW_AGENT_CAPABILITIES,
 * FLOW_AGENT_WORKDIR, FLOW_CLIENT_DIR); runs that job and exits. Exit status: 0 when the job ended
 * as it should (finished, suspended because the run parked, lost to another agent, stopped by
 * SIGTERM, or already taken at claim); 1 on an agent failure; 2 on a bad environment.
 *
 * Worker mode (FLOW_AGENT_MODE=worker; the local launcher only): no job in the environment; jobs
 * come one at a time over the IPC channel (worker.ts, which also lists its exit statuses).
 */
import { FlowError } from "@flowsvc/core";
import { AgentApiClient } from "./agent-api-client.js";
import { loadAgentConfig } from "./config.js";
import type { JobAgentConfig, WorkerAgentConfig } from "./config.js";
import { agentJobOptions, outcomeFields } from "./job-kit.js";
import { createLogger } from "./logger.js";
import type { Logger } from "./logger.js";
import { runJob } from "./run-job.js";
import { startWorker } from "./worker.js";
import type { WorkerChannel } from "./worker.js";

const STOP_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

const runOneJob = (config: JobAgentConfig, logger: Logger): void => {
  const stop = new AbortController();
  for (const signal of STOP_SIGNALS) {
    process.on(signal, () => {
      if (stop.signal.aborted) return;
      logger.info({ signal }, "stopping: the script is ended and the job is left to its lease");
      stop.abort(new FlowError("unavailable", "the agent is stopping"));
    });
  }
  const backend = new AgentApiClient({ serverUrl: config.serverUrl, token: config.jobToken, logger });
  runJob(backend, agentJobOptions(config, config, { logger, stop: stop.signal, agentPid: process.pid })).then(
    (outcome) => {
      logger.info(outcomeFields(outcome), "agent done");
      process.exit(0);
    },
    (err: unknown) => {
      logger.error({ err }, "agent failed");
      process.exit(1);
    },
  );
};

/** The IPC channel the launcher opened (stdio "ipc"), or undefined when there is none. */
const ipcChannel = (logger: Logger): WorkerChannel | undefined => {
  if (!process.send) return undefined;
  return {
    send: (message) => {
      process.send?.(message, undefined, undefined, (err: Error | null) => {
        if (err) logger.warn({ err }, "could not answer the launcher");
      });
    },
    onMessage: (listener) => process.on("message", listener),
    onDisconnect: (listener) => process.once("disconnect", listener),
  };
};

const runWorkerMode = (config: WorkerAgentConfig, logger: Logger): void => {
  const channel = ipcChannel(logger);
  if (!channel) {
    process.stderr.write("error: FLOW_AGENT_MODE=worker needs the IPC channel of the local launcher that starts it\n");
    process.exit(2);
  }
  const worker = startWorker({ config, channel, logger, agentPid: process.pid });
  for (const signal of STOP_SIGNALS) process.on(signal, () => worker.stop(signal));
  void worker.exited.then((code) => process.exit(code));
};

const config = loadAgentConfig();
process.stderr.on("error", () => undefined); // a launcher that went away must not crash the agent
if (config.mode === "worker") {
  runWorkerMode(
    config,
    createLogger((line) => process.stderr.write(line), { pid: process.pid, mode: "worker" }, config.logLevel),
  );
} else {
  runOneJob(
    config,
    createLogger((line) => process.stderr.write(line), { agentId: config.agentId, pid: process.pid }, config.logLevel),
  );
}
