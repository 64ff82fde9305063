/**
 * The agent's configuration, parsed once from the environment the launcher gave it. This is the
 * only file of the agent that reads `process.env`; everything else gets an AgentConfig.
 */
import { tmpdir } from "node:os";
import { isAbsolute } from "node:path";
import { z } from "zod";
import { FlowError, describeIssues } from "@flowsvc/core";

const required = () => z.string({ error: "is required" }).min(1, "is required");
const absoluteDir = z.string().min(1).refine(isAbsolute, "must be an absolute path");

const EnvSchema = z.object({
  FLOW_SERVER_URL: z.url({ protocol: /^https?$/, error: (iss) => (iss.input === undefined ? "is required" : "must be an http(s) URL") }),
  FLOW_JOB_TOKEN: required(),
  FLOW_AGENT_ID: required().max(64),
  FLOW_AGENT_CAPABILITIES: z.string().optional(),
  FLOW_AGENT_WORKDIR: absoluteDir.optional(),
  FLOW_CLIENT_DIR: absoluteDir.optional(),
});

export interface AgentConfig {
  /** Without a trailing slash: `${serverUrl}/agent/v1/...`. */
  readonly serverUrl: string;
  readonly jobToken: string;
  readonly agentId: string;
  readonly capabilities: readonly string[];
  /** Where the job's scratch directory is made. */
  readonly workdir: string;
  /** Directory holding the in-script `flow` client, put first on the script's PATH. */
  readonly clientDir: string | undefined;
  /** The agent's own environment: the script gets only its passthrough part (core/script-env). */
  readonly agentEnv: Readonly<Record<string, string | undefined>>;
}

/** Parses the environment; throws FlowError("config") listing every problem. */
export const parseAgentConfig = (env: Readonly<Record<string, string | undefined>>): AgentConfig => {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new FlowError("config", `invalid agent environment: ${describeIssues(parsed.error.issues)}`, {
      details: { problems: parsed.error.issues.map((i) => `${i.path.map(String).join(".")}: ${i.message}`) },
    });
  }
  const e = parsed.data;
  return {
    serverUrl: e.FLOW_SERVER_URL.replace(/\/+$/, ""),
    jobToken: e.FLOW_JOB_TOKEN,
    agentId: e.FLOW_AGENT_ID,
    capabilities: (e.FLOW_AGENT_CAPABILITIES ?? "").split(",").map((c) => c.trim()).filter((c) => c !== ""),
    workdir: e.FLOW_AGENT_WORKDIR ?? tmpdir(),
    clientDir: e.FLOW_CLIENT_DIR,
    agentEnv: { ...env },
  };
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
