/**
 * `code` and `shell` nodes: a script on an agent, as a job of the graph run (the engine's `job`
 * outcome; the driver queues it in the transaction that starts the attempt). `code`: `source` in
 * any interpreter (`interpreter`, the command split on spaces, default `bash -eu`); `shell`:
 * `command`, run by `bash -eu`. Both take `credentials` (ENV_VAR -> credential name, resolved at
 * claim exactly like a script's `--credential`: all or the job fails), `env` and `requires` (an
 * agent capability), and `timeout` (core's duration, counted from the attempt's start: past it the
 * job is ended, its script stopped, and the attempt fails with a timeout error; retry applies).
 * Output: the script's `flow output set` values, `exit_code` and the tail of its stdout.
 */
import { FlowError, NODE_JOB_TIMEOUT_MAX_MS, assertCredentialMap, pickInterpreter } from "@flowsvc/core";
import type { AgentJobSpec, NodeExecutor } from "./types.js";
import { asConfig, durationMs, requiredStr, stringList, stringMap, type Config } from "./config.js";

const common = (c: Config): Pick<AgentJobSpec, "credentials" | "env" | "capabilities" | "timeout_ms"> => {
  const credentials = stringMap(c, "credentials");
  assertCredentialMap(credentials, "config.credentials");
  const timeout = c["timeout"] === undefined ? {} : { timeout_ms: durationMs(c, "timeout", 0, NODE_JOB_TIMEOUT_MAX_MS) };
  return { credentials, env: stringMap(c, "env"), capabilities: stringList(c, "requires") ?? [], ...timeout };
};

/** The agent job of a code or shell node's evaluated config; undefined for any other type. Throws FlowError on a bad config. */
export const agentJobOf = (type: string, nodeId: string, config: unknown): AgentJobSpec | undefined => {
  if (type !== "code" && type !== "shell") return undefined;
  const c = asConfig(config);
  const filename = `${nodeId}.sh`;
  if (type === "shell") return { source: requiredStr(c, "command"), filename, interpreter: ["bash", "-eu"], ...common(c) };
  if (c["file"] !== undefined)
    throw new FlowError("invalid_argument", "config.file: a code node runs its `source` in this version; put the script's text there");
  return {
    source: requiredStr(c, "source"),
    filename,
    interpreter: stringList(c, "interpreter") ?? pickInterpreter(filename),
    ...common(c),
  };
};

const jobExecutor = (type: "code" | "shell"): NodeExecutor => ({
  type,
  start: (ctx) => Promise.resolve({ kind: "job", job: agentJobOf(type, ctx.node.id, ctx.config)! }),
});

export const codeExecutor = jobExecutor("code");
export const shellExecutor = jobExecutor("shell");
