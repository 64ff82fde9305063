/**
 * The environment a script runs with (spec, Limits: "Script env passthrough" and "Script
 * environment always set"; Secret rules 2 and 3). Pure: the agent passes its own environment in.
 *
 * Layers, later wins:
 * 1. the passthrough list, taken from the agent's environment (nothing else of the agent's leaks);
 * 2. the claim's env: the project's secrets with the workflow's `env:` already merged over them;
 * 3. `CI_TRIGGER_*` scalars from the trigger envelope, unless layer 2 set them;
 * 4. the service variables (`FLOW_AGENT_SOCKET`, ... and `PATH`), which nothing can shadow.
 */

/** Exact names passed through from the agent's environment; `LC_*` is matched by prefix. */
export const PASSTHROUGH_VARS: readonly string[] = [
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "TERM",
  "LANG",
  "LANGUAGE",
  "TZ",
  "TMPDIR",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "NIX_SSL_CERT_FILE",
];

const PASSTHROUGH = new Set(PASSTHROUGH_VARS);

export const isPassthroughVar = (name: string): boolean => PASSTHROUGH.has(name) || /^LC_[A-Z0-9_]+$/.test(name);

/** The service variables every script gets; they win over workflow `env:` and secrets. */
export interface FlowVars {
  readonly FLOW_AGENT_SOCKET: string;
  readonly FLOW_AGENT_PID: string;
  readonly FLOW_AGENT_ID: string;
  /** The run id. */
  readonly FLOW_WORKFLOW_ID: string;
  /** The job id. */
  readonly FLOW_ACTIVITY_ID: string;
  readonly FLOW_INPUT_FILE: string;
}

export interface ScriptEnvParts {
  /** The agent's own environment; only the passthrough list is read from it. */
  readonly agentEnv: Readonly<Record<string, string | undefined>>;
  /** The claim's `env`: workflow env merged over the project's secrets by the server. */
  readonly claimEnv: Readonly<Record<string, string>>;
  /** The claim's trigger envelope; absent or without `type` means a manual start. */
  readonly trigger?: Readonly<Record<string, unknown>>;
  readonly flowVars: FlowVars;
  /** The final `PATH` (see prependPath). */
  readonly path: string;
}

/** Envelope fields copied to `CI_TRIGGER_*` when they are scalars (spec, Events). */
const TRIGGER_FIELDS: ReadonlyArray<readonly [field: string, variable: string]> = [
  ["event", "CI_TRIGGER_EVENT_ID"],
  ["sha", "CI_TRIGGER_SHA"],
  ["short_sha", "CI_TRIGGER_SHORT_SHA"],
  ["ref", "CI_TRIGGER_REF"],
  ["repo", "CI_TRIGGER_REPO"],
  ["sender", "CI_TRIGGER_SENDER"],
  ["forge", "CI_TRIGGER_FORGE"],
  ["schedule", "CI_TRIGGER_SCHEDULE"],
  ["parent", "CI_TRIGGER_PARENT"],
];

const scalar = (value: unknown): string | undefined =>
  typeof value === "string" || typeof value === "number" || typeof value === "boolean" ? String(value) : undefined;

/** `CI_TRIGGER_EVENT` (always; `manual` by default) and the other scalar envelope fields present. */
export const triggerEnv = (trigger: Readonly<Record<string, unknown>> | undefined): Record<string, string> => {
  const env: Record<string, string> = { CI_TRIGGER_EVENT: scalar(trigger?.["type"]) || "manual" };
  for (const [field, variable] of TRIGGER_FIELDS) {
    const value = scalar(trigger?.[field]);
    if (value !== undefined) env[variable] = value;
  }
  if (env["CI_TRIGGER_SHORT_SHA"] === undefined && env["CI_TRIGGER_SHA"] !== undefined) {
    env["CI_TRIGGER_SHORT_SHA"] = env["CI_TRIGGER_SHA"].slice(0, 7);
  }
  return env;
};

/** `dir` first, then the entries of `path` (without a second copy of `dir`). */
export const prependPath = (dir: string | undefined, path: string | undefined): string => {
  const rest = (path ?? "").split(":").filter((p) => p !== "" && p !== dir);
  return (dir ? [dir, ...rest] : rest).join(":");
};

export const composeScriptEnv = (parts: ScriptEnvParts): Record<string, string> => {
  // A Map, then fromEntries: a variable named `__proto__` stays a plain entry.
  const env = new Map<string, string>();
  for (const [name, value] of Object.entries(parts.agentEnv)) {
    if (value !== undefined && isPassthroughVar(name)) env.set(name, value);
  }
  for (const [name, value] of Object.entries(parts.claimEnv)) env.set(name, value);
  for (const [name, value] of Object.entries(triggerEnv(parts.trigger))) {
    if (!Object.hasOwn(parts.claimEnv, name)) env.set(name, value);
  }
  for (const [name, value] of Object.entries(parts.flowVars as Readonly<Record<keyof FlowVars, string>>)) env.set(name, value);
  env.set("PATH", parts.path);
  return Object.fromEntries(env);
};
