/**
 * The in-script commands and the dispatch table. A later command (call, ...) is one module
 * exporting an InScriptCommand and one entry in COMMANDS here, and one entry in COMMANDS of
 * agent-image/native/flow.c.
 *
 * Entries load their module on demand: every ES module costs ~1 ms of start-up here, and a
 * script pays start-up on every call of every replay.
 */
import type { InScriptCommand } from "./command-kit.js";

/**
 * Commands this client takes inside a script run by flowsvc (they need FLOW_AGENT_SOCKET). All but
 * the SHARED_COMMANDS make sense only there; those are user commands too (cli/src/commands/route.ts).
 */
export const IN_SCRIPT_COMMANDS = [
  "step",
  "sleep",
  "wait-signal",
  "wait-event",
  "lock",
  "activity",
  "activity-submit",
  "activity-collect",
  "activity-wait-all",
  "spawn",
  "state",
  "call",
  "output",
  "annotate",
  "emit",
] as const;

/** In-script commands that outside a script are the user CLI's: `flow emit` over HTTP. */
export const SHARED_COMMANDS: readonly string[] = ["emit"];

export type InScriptCommandName = (typeof IN_SCRIPT_COMMANDS)[number];

/** The commands this client speaks over the socket today. */
export const COMMANDS: Readonly<Partial<Record<InScriptCommandName, () => Promise<InScriptCommand>>>> = {
  step: async () => (await import("./step.js")).stepCommand,
  output: async () => (await import("./output.js")).outputCommand,
  annotate: async () => (await import("./annotate.js")).annotateCommand,
  sleep: async () => (await import("./sleep.js")).sleepCommand,
  "wait-signal": async () => (await import("./wait-signal.js")).waitSignalCommand,
  lock: async () => (await import("./lock.js")).lockCommand,
  activity: async () => (await import("./activity.js")).activityCommand,
  "activity-submit": async () => (await import("./activity.js")).activitySubmitCommand,
  "activity-collect": async () => (await import("./activity.js")).activityCollectCommand,
  "activity-wait-all": async () => (await import("./activity.js")).activityWaitAllCommand,
  spawn: async () => (await import("./spawn.js")).spawnCommand,
  call: async () => (await import("./call.js")).callCommand,
  state: async () => (await import("./state.js")).stateCommand,
  emit: async () => (await import("./emit.js")).emitCommand,
  "wait-event": async () => (await import("./wait-event.js")).waitEventCommand,
};

export const isInScriptCommand = (name: string | undefined): name is InScriptCommandName =>
  (IN_SCRIPT_COMMANDS as readonly string[]).includes(name ?? "");

/**
 * Whether this client runs `name` rather than the user CLI: an in-script-only command always; a
 * shared one (emit) only inside a script, that is with FLOW_AGENT_SOCKET set, or
 * FLOW_IDEMPOTENCY_KEY inside a step body, where it must fail with `FLOW_AGENT_SOCKET is not set`
 * rather than reach the user API (as cli/src/commands/route.ts decides for the user CLI).
 */
export const runsInScript = (name: string | undefined, env: Readonly<Record<string, string | undefined>>): boolean =>
  isInScriptCommand(name) && (!SHARED_COMMANDS.includes(name) || Boolean(env.FLOW_AGENT_SOCKET || env.FLOW_IDEMPOTENCY_KEY));
