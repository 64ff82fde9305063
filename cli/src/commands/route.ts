/**
 * Which client runs an invocation, decided from argv and the environment alone. bin/flow.ts calls
 * this before loading commander or zod: it runs for every durable call of every script.
 */
import type { Environment } from "../config.js";

/** The user CLI's top-level commands (program.ts registers exactly these; a test checks it). */
export const USER_COMMANDS: readonly string[] = [
  "submit",
  "follow",
  "runs",
  "status",
  "steps",
  "signal",
  "approve",
  "rerun",
  "cancel",
  "run",
  "check",
  "secret",
  "credential",
  "account",
  "member",
  "user",
  "token",
  "events",
  "emit",
  "event-hook",
  "handler",
  "schedule",
  "agents",
  "graph",
  "login",
  "completion",
  "server",
  "help",
];

/** User commands that are also in-script primitives: inside a script the in-script client takes them. */
export const SHARED_COMMANDS: readonly string[] = ["emit"];

/**
 * Inside a script the agent sets FLOW_AGENT_SOCKET; inside a step body only FLOW_IDEMPOTENCY_KEY
 * survives, and there an in-script call must fail with `FLOW_AGENT_SOCKET is not set` rather than
 * reach the user API.
 */
export const isInsideScript = (env: Environment): boolean => Boolean(env.FLOW_AGENT_SOCKET || env.FLOW_IDEMPOTENCY_KEY);

/** True when argv's command may be an in-script one: bin/flow.ts then asks the in-script client. */
export const mayBeInScript = (argv: readonly string[], env: Environment): boolean => {
  const name = argv[2];
  if (name === undefined || name.startsWith("-")) return false;
  if (!USER_COMMANDS.includes(name)) return true;
  return SHARED_COMMANDS.includes(name) && isInsideScript(env);
};

const GLOBAL_OPTIONS_WITH_VALUE: readonly string[] = ["--url", "--token", "--project"];

/** The top-level command argv names, past the global options (`flow --url u server` is `server`). */
export const topCommandOf = (argv: readonly string[]): string | undefined => {
  for (let i = 2; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (GLOBAL_OPTIONS_WITH_VALUE.includes(arg)) i++;
    else if (!arg.startsWith("-")) return arg;
  }
  return undefined;
};
