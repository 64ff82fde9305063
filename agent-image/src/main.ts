/**
 * The agent's entry point: `node agent-image/dist/main.js`, started by a launcher once per job
 * with FLOW_SERVER_URL, FLOW_JOB_TOKEN, FLOW_AGENT_ID (and optionally FLOW_AGENT_CAPABILITIES,
 * FLOW_AGENT_WORKDIR, FLOW_CLIENT_DIR). Diagnostics go to stderr as JSON lines.
 *
 * Exit status: 0 when the job ended as it should (finished, suspended because the run parked, lost
 * to another agent, stopped by SIGTERM, or already taken at claim); 1 on an agent failure; 2 on a
 * bad environment.
 */
import { join } from "node:path";
import { FlowError } from "@flowsvc/core";
import { AgentApiClient } from "./agent-api-client.js";
import { loadAgentConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { runJob } from "./run-job.js";

const config = loadAgentConfig();
process.stderr.on("error", () => undefined); // a launcher that went away must not crash the agent
const logger = createLogger((line) => process.stderr.write(line), { agentId: config.agentId, pid: process.pid });

const stop = new AbortController();
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  process.on(signal, () => {
    if (stop.signal.aborted) return;
    logger.info({ signal }, "stopping: the script is ended and the job is left to its lease");
    stop.abort(new FlowError("unavailable", "the agent is stopping"));
  });
}

const backend = new AgentApiClient({ serverUrl: config.serverUrl, token: config.jobToken, logger });
runJob(backend, {
  agentId: config.agentId,
  capabilities: config.capabilities,
  workdir: config.workdir,
  clientDir: config.clientDir,
  agentEnv: config.agentEnv,
  logger,
  stop: stop.signal,
  agentPid: process.pid,
  // The launcher reads this to end the script's group should the agent die without doing it.
  pgidFile: join(config.workdir, "script.pgid"),
}).then(
  (outcome) => {
    logger.info({ outcome: outcome.type, ...(outcome.type === "finished" ? { exitCode: outcome.exitCode } : {}) }, "agent done");
    process.exit(0);
  },
  (err: unknown) => {
    logger.error({ err }, "agent failed");
    process.exit(1);
  },
);
