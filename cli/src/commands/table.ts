/**
 * The user CLI's table of top-level commands, without commander: program.ts builds the commander
 * program from it, and fast.ts runs a CommandSpec's plain call from it without commander (every
 * command but run, check, completion and server, which send no request to the API).
 * scripts/bundle-cli.mjs reads this file's table to write a bundle per command.
 */
import type { Command } from "commander";
import type { CommandDeps } from "./context.js";
import { topCommandOf } from "./route.js";
import type { CommandSpec } from "./spec.js";

/** What a command module exports: the commander definition of one top-level command, its action included, or its CommandSpec (spec.ts). */
export type CommandFactory = (deps: CommandDeps) => Command;
export type CommandDefinition = CommandFactory | CommandSpec;

/** One top-level command: its name, how to import its module, and whether it needs every other command (to describe them). */
interface CommandEntry {
  readonly name: string;
  readonly load: () => Promise<CommandDefinition>;
  readonly needsAll?: boolean;
}

/**
 * The user CLI's top-level commands, in help order. Each module is imported only when its command
 * runs (or for the top-level help), so `flow status` loads status.ts and not the server, the local
 * engine or the other commands. A new command is one line here plus its name in route.ts's
 * USER_COMMANDS (route.test.ts checks the two agree).
 */
export const COMMANDS: readonly CommandEntry[] = [
  { name: "submit", load: async () => (await import("./submit.js")).submitSpec },
  { name: "follow", load: async () => (await import("./follow.js")).followSpec },
  { name: "runs", load: async () => (await import("./runs.js")).runsSpec },
  { name: "status", load: async () => (await import("./status.js")).statusSpec },
  { name: "steps", load: async () => (await import("./steps.js")).stepsSpec },
  { name: "signal", load: async () => (await import("./signal.js")).signalSpec },
  { name: "approve", load: async () => (await import("./approve.js")).approveSpec },
  { name: "rerun", load: async () => (await import("./rerun.js")).rerunSpec },
  { name: "cancel", load: async () => (await import("./cancel.js")).cancelSpec },
  { name: "secret", load: async () => (await import("./secret.js")).secretSpec },
  { name: "credential", load: async () => (await import("./credential.js")).credentialSpec },
  { name: "account", load: async () => (await import("./account.js")).accountSpec },
  { name: "member", load: async () => (await import("./member.js")).memberSpec },
  { name: "user", load: async () => (await import("./user.js")).userSpec },
  { name: "token", load: async () => (await import("./token.js")).tokenSpec },
  { name: "events", load: async () => (await import("./events.js")).eventsSpec },
  { name: "emit", load: async () => (await import("./emit.js")).emitSpec },
  { name: "event-hook", load: async () => (await import("./event-hook.js")).eventHookSpec },
  { name: "handler", load: async () => (await import("./handler.js")).handlerSpec },
  { name: "schedule", load: async () => (await import("./schedule.js")).scheduleSpec },
  { name: "agents", load: async () => (await import("./agents.js")).agentsSpec },
  { name: "graph", load: async () => (await import("./graph.js")).graphSpec },
  { name: "login", load: async () => (await import("./login.js")).loginSpec },
  { name: "run", load: async () => (await import("./run.js")).runCommand },
  { name: "check", load: async () => (await import("./check.js")).checkCommand },
  { name: "completion", load: async () => (await import("./completion.js")).completionCommand, needsAll: true },
  // The definition only: server/command.ts imports the server itself when `flow server` runs.
  { name: "server", load: async () => (await import("../server/command.js")).serverCommand },
];

const VERSION_FLAGS: readonly string[] = ["-V", "--version"];

/**
 * The commands an invocation needs: its own; none for `flow --version`; all of them for help, a
 * bare `flow`, a name commander must call unknown (it suggests the nearest), and `flow completion`.
 */
export const commandsFor = (argv?: readonly string[]): readonly CommandEntry[] => {
  if (argv === undefined) return COMMANDS;
  const top = topCommandOf(argv);
  const entry = COMMANDS.find((c) => c.name === top);
  if (entry) return entry.needsAll ? COMMANDS : [entry];
  if (top === undefined && argv.slice(2).some((a) => VERSION_FLAGS.includes(a))) return [];
  return COMMANDS;
};
