/** What every in-script command is made of: its help, its usage errors, the socket check. */
import { AgentConnection } from "./connection.js";
import type { AgentRequest } from "./connection.js";
import { ClientError } from "./io.js";
import { applyResponse } from "./response.js";

export type ClientEnv = Readonly<Record<string, string | undefined>>;

export interface InScriptCommand {
  readonly name: string;
  /** The usage line without `usage: `. */
  readonly usage: string;
  readonly summary: string;
  readonly example: string;
  /** args are the words after the command name; returns the exit status. */
  run(args: readonly string[], env: ClientEnv): Promise<number>;
}

/** A usage error: `error: flow <cmd>: <what>` and the usage line, exit 2. */
export const usageError = (command: InScriptCommand, what: string): ClientError =>
  new ClientError([`error: flow ${command.name}: ${what}`, `usage: ${command.usage}`], 2);

export const helpText = (command: InScriptCommand): string => `usage: ${command.usage}\n${command.summary}\nexample: ${command.example}\n`;

/** -h or --help before any `--`. */
export const wantsHelp = (args: readonly string[]): boolean => {
  for (const a of args) {
    if (a === "--") return false;
    if (a === "-h" || a === "--help") return true;
  }
  return false;
};

/** The agent's socket path; a `flow` call outside a script (or in a step body) has none. */
export const agentSocket = (env: ClientEnv, commandName: string): string => {
  const path = env.FLOW_AGENT_SOCKET;
  if (path) return path;
  throw new ClientError([
    "error: FLOW_AGENT_SOCKET is not set",
    `flow ${commandName} works only inside a script run by flowsvc (flow submit / flow run)`,
  ]);
};

/**
 * One request on a fresh connection, answered generically: output set, annotate, sleep, ...
 * minProtocol > 1 asks the agent's version first and refuses an older agent (a bounded wait).
 */
export const simpleCall = async (env: ClientEnv, commandName: string, request: AgentRequest, minProtocol = 1): Promise<number> => {
  const connection = await AgentConnection.open(agentSocket(env, commandName));
  try {
    return applyResponse(await connection.call(request, minProtocol), 0);
  } finally {
    connection.close();
  }
};
