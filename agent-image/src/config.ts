/**
 * The agent's configuration, parsed once from the environment the launcher gave it. This is the
 * only file of the agent that reads `process.env`; everything else gets an AgentConfig.
 *
 * Two modes (FLOW_AGENT_MODE):
 * - `job` (the default; what a Kubernetes Pod runs): FLOW_JOB_TOKEN and FLOW_AGENT_ID name the one
 *   job this process runs, then it exits;
 * - `worker` (the local launcher only): no job in the environment; jobs arrive one at a time over
 *   the IPC channel, each with its own token, agent id and working directory (worker.ts).
 */
import { tmpdir } from "node:os";
import { isAbsolute } from "node:path";
import { z } from "zod";
import { FlowError, describeIssues } from "@flowsvc/core";
import type { LogLevel } from "./logger.js";

const required = (message = "is required") => z.string({ error: message }).min(1, message);
const absoluteDir = z.string().min(1).refine(isAbsolute, "must be an absolute path");

const CommonEnv = {
  FLOW_SERVER_URL: z.url({ protocol: /^https?$/, error: (iss) => (iss.input === undefined ? "is required" : "must be an http(s) URL") }),
  FLOW_AGENT_CAPABILITIES: z.string().optional(),
  FLOW_CLIENT_DIR: absoluteDir.optional(),
  FLOW_AGENT_LOG_LEVEL: z.enum(["debug", "info", "warn", "error"], { error: 'must be "debug", "info", "warn" or "error"' }).optional(),
};

const JobEnvSchema = z.object({
  ...CommonEnv,
  FLOW_AGENT_MODE: z.literal("job", { error: 'must be "job" (the default) or "worker"' }).optional(),
  FLOW_JOB_TOKEN: required("is required (the token of the one job this agent runs; only FLOW_AGENT_MODE=worker runs without one)"),
  FLOW_AGENT_ID: required().max(64),
  FLOW_AGENT_WORKDIR: absoluteDir.optional(),
});

const WorkerEnvSchema = z.object({
  ...CommonEnv,
  FLOW_AGENT_MODE: z.literal("worker"),
  // Each job brings its own over IPC; one in the environment is a launcher mistake, not a default.
  FLOW_JOB_TOKEN: z.undefined({ error: "must not be set with FLOW_AGENT_MODE=worker (each job brings its own token)" }).optional(),
});

interface CommonConfig {
  /** Without a trailing slash: `${serverUrl}/agent/v1/...`. */
  readonly serverUrl: string;
  readonly capabilities: readonly string[];
  /** Directory holding the in-script `flow` client, put first on the script's PATH. */
  readonly clientDir: string | undefined;
  /** The agent's own environment: the script gets only its passthrough part (core/script-env). */
  readonly agentEnv: Readonly<Record<string, string | undefined>>;
  /** The least level of the agent's stderr lines (FLOW_AGENT_LOG_LEVEL, default info). */
  readonly logLevel: LogLevel;
}

export interface JobAgentConfig extends CommonConfig {
  readonly mode: "job";
  readonly jobToken: string;
  readonly agentId: string;
  /** Where the job's scratch directory is made. */
  readonly workdir: string;
}

/** Worker mode: the token, agent id and working directory come with each job (worker.ts). */
export interface WorkerAgentConfig extends CommonConfig {
  readonly mode: "worker";
}

export type AgentConfig = JobAgentConfig | WorkerAgentConfig;

const problemsOf = (issues: readonly z.core.$ZodIssue[]): string[] => issues.map((i) => `${i.path.map(String).join(".")}: ${i.message}`);

/** Parses the environment; throws FlowError("config") listing every problem. */
export const parseAgentConfig = (env: Readonly<Record<string, string | undefined>>): AgentConfig => {
  const parsed = env["FLOW_AGENT_MODE"] === "worker" ? WorkerEnvSchema.safeParse(env) : JobEnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new FlowError("config", `invalid agent environment: ${describeIssues(parsed.error.issues)}`, {
      details: { problems: problemsOf(parsed.error.issues) },
    });
  }
  const e = parsed.data;
  const common: CommonConfig = {
    serverUrl: e.FLOW_SERVER_URL.replace(/\/+$/, ""),
    capabilities: (e.FLOW_AGENT_CAPABILITIES ?? "")
      .split(",")
      .map((c) => c.trim())
      .filter((c) => c !== ""),
    clientDir: e.FLOW_CLIENT_DIR,
    agentEnv: { ...env },
    logLevel: e.FLOW_AGENT_LOG_LEVEL ?? "info",
  };
  if (e.FLOW_AGENT_MODE === "worker") return { ...common, mode: "worker" };
  return { ...common, mode: "job", jobToken: e.FLOW_JOB_TOKEN, agentId: e.FLOW_AGENT_ID, workdir: e.FLOW_AGENT_WORKDIR ?? tmpdir() };
};

/** Reads process.env once; on a bad value prints every problem to stderr and exits 2. */
export const loadAgentConfig = (): AgentConfig => {
  try {
    return parseAgentConfig(process.env);
  } catch (err) {
    const problems = err instanceof FlowError ? (err.details?.["problems"] as string[] | undefined) : undefined;
    const lines = problems ?? [String(err)];
    process.stderr.write(`error: invalid agent environment\n${lines.map((l) => `  ${l}\n`).join("")}`);
    process.exit(2);
  }
};
