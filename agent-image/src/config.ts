/**
 * The agent's configuration, parsed once from the environment the launcher gave it. This is the
 * only file of the agent that reads `process.env`; everything else gets an AgentConfig.
 *
 * Two modes (FLOW_AGENT_MODE):
 * - `job` (the default; what a Kubernetes Pod runs): FLOW_AGENT_ID and the job's token name the one
 *   job this process runs, then it exits. The token comes from FLOW_JOB_TOKEN_FILE (a Pod mounts it
 *   from the job's Secret, so it is never in the Pod spec) or from FLOW_JOB_TOKEN, never both;
 * - `worker` (the local launcher only): no job in the environment; jobs arrive one at a time over
 *   the IPC channel, each with its own token, agent id and working directory (worker.ts).
 */
import { readFileSync } from "node:fs";
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

const JobEnv = {
  ...CommonEnv,
  FLOW_AGENT_MODE: z.literal("job", { error: 'must be "job" (the default) or "worker"' }).optional(),
  FLOW_AGENT_ID: required().max(64),
  FLOW_AGENT_WORKDIR: absoluteDir.optional(),
};

const JobEnvSchema = z.object({
  ...JobEnv,
  FLOW_JOB_TOKEN: required(
    "is required (the token of the one job this agent runs, or FLOW_JOB_TOKEN_FILE naming a file that holds it; only FLOW_AGENT_MODE=worker runs without one)",
  ),
});

/** The token in a file (a Pod mounts the job's Secret): the file is read once the environment parsed. */
const JobFileEnvSchema = z.object({
  ...JobEnv,
  FLOW_JOB_TOKEN_FILE: absoluteDir,
  FLOW_JOB_TOKEN: z.undefined({ error: "must not be set together with FLOW_JOB_TOKEN_FILE (give the token one way)" }).optional(),
});

/** Longest token file read (a job token is about 60 bytes). */
const MAX_TOKEN_FILE = 4096;

/** The token in FLOW_JOB_TOKEN_FILE, trailing white space dropped; a FlowError("config") naming the variable otherwise. */
const readTokenFile = (path: string): string => {
  const problem = (message: string): FlowError =>
    new FlowError("config", `invalid agent environment: FLOW_JOB_TOKEN_FILE: ${message}`, {
      details: { problems: [`FLOW_JOB_TOKEN_FILE: ${message}`] },
    });
  let text: string;
  try {
    text = readFileSync(path, { encoding: "utf8", flag: "r" });
  } catch (err) {
    throw problem(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  const token = text.trimEnd();
  if (token === "" || token.length > MAX_TOKEN_FILE || /[\s\0]/.test(token))
    throw problem(`${path} does not hold one token (empty, over ${MAX_TOKEN_FILE} bytes, or white space inside)`);
  return token;
};

const WorkerEnvSchema = z.object({
  ...CommonEnv,
  FLOW_AGENT_MODE: z.literal("worker"),
  // Each job brings its own over IPC; one in the environment is a launcher mistake, not a default.
  FLOW_JOB_TOKEN: z.undefined({ error: "must not be set with FLOW_AGENT_MODE=worker (each job brings its own token)" }).optional(),
  FLOW_AGENT_SPAWNER: z.enum(["on", "off"], { error: 'must be "on" (the default) or "off"' }).optional(),
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
  /**
   * false (FLOW_AGENT_SPAWNER=off): scripts start with Node's spawn even where the native spawner
   * (script-spawner.ts) was built. Unset: the spawner where the host has one.
   */
  readonly spawner?: boolean;
}

export type AgentConfig = JobAgentConfig | WorkerAgentConfig;

const problemsOf = (issues: readonly z.core.$ZodIssue[]): string[] => issues.map((i) => `${i.path.map(String).join(".")}: ${i.message}`);

/** Parses the environment; throws FlowError("config") listing every problem. */
export const parseAgentConfig = (env: Readonly<Record<string, string | undefined>>): AgentConfig => {
  const parsed =
    env["FLOW_AGENT_MODE"] === "worker"
      ? WorkerEnvSchema.safeParse(env)
      : env["FLOW_JOB_TOKEN_FILE"] !== undefined
        ? JobFileEnvSchema.safeParse(env)
        : JobEnvSchema.safeParse(env);
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
  if (e.FLOW_AGENT_MODE === "worker") return { ...common, mode: "worker", spawner: e.FLOW_AGENT_SPAWNER !== "off" };
  const token = "FLOW_JOB_TOKEN_FILE" in e ? readTokenFile(e.FLOW_JOB_TOKEN_FILE) : e.FLOW_JOB_TOKEN;
  return { ...common, mode: "job", jobToken: token, agentId: e.FLOW_AGENT_ID, workdir: e.FLOW_AGENT_WORKDIR ?? tmpdir() };
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
