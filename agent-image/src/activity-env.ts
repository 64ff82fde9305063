/**
 * The environment of an activity child's command: the step-body rule (spec, Limits: "Step body
 * env: sealed"), without even FLOW_IDEMPOTENCY_KEY. The agent's passthrough variables, then the
 * claim's env (the workflow env merged over the project's secrets), then PATH (the agent's, with
 * the in-script client first so a nested `flow` says it has no socket); no `FLOW_*` variable at all.
 */
import { isPassthroughVar, prependPath } from "@flowsvc/core";

export interface ActivityEnvParts {
  readonly agentEnv: Readonly<Record<string, string | undefined>>;
  readonly claimEnv: Readonly<Record<string, string>>;
  readonly clientDir: string | undefined;
}

const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";

export const composeActivityEnv = (parts: ActivityEnvParts): Record<string, string> => {
  // A Map, then fromEntries: a variable named `__proto__` stays a plain entry.
  const env = new Map<string, string>();
  for (const [name, value] of Object.entries(parts.agentEnv)) {
    if (value !== undefined && isPassthroughVar(name)) env.set(name, value);
  }
  for (const [name, value] of Object.entries(parts.claimEnv)) env.set(name, value);
  for (const name of [...env.keys()]) if (name.startsWith("FLOW_")) env.delete(name);
  env.set("PATH", prependPath(parts.clientDir, parts.agentEnv["PATH"] ?? DEFAULT_PATH));
  return Object.fromEntries(env);
};
