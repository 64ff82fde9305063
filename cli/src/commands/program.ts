/**
 * The user CLI: builds the commander program and runs it. Errors come back here and are printed
 * once (`error: ...`, then the hint); commander's usage errors become exit status 2.
 */
import { Command, CommanderError } from "commander";
import { FlowError } from "@flowsvc/core/errors";
import { printError } from "../print-error.js";
import { cliVersion } from "../version.js";
import type { CliDeps, CommandDeps } from "./context.js";
import { examples, parseProjectFlag, parseUrlFlag } from "./options.js";
import { topCommandOf } from "./route.js";

/** What a command module exports: the commander definition of one top-level command, its action included. */
export type CommandFactory = (deps: CommandDeps) => Command;

/** One top-level command: its name, how to import its module, and whether it needs every other command (to describe them). */
interface CommandEntry {
  readonly name: string;
  readonly load: () => Promise<CommandFactory>;
  readonly needsAll?: boolean;
}

/**
 * The user CLI's top-level commands, in help order. Each module is imported only when its command
 * runs (or for the top-level help), so `flow status` loads status.ts and not the server, the local
 * engine or the other commands. A new command is one line here plus its name in route.ts's
 * USER_COMMANDS (route.test.ts checks the two agree).
 */
const COMMANDS: readonly CommandEntry[] = [
  { name: "submit", load: async () => (await import("./submit.js")).submitCommand },
  { name: "follow", load: async () => (await import("./follow.js")).followCommand },
  { name: "runs", load: async () => (await import("./runs.js")).runsCommand },
  { name: "status", load: async () => (await import("./status.js")).statusCommand },
  { name: "steps", load: async () => (await import("./steps.js")).stepsCommand },
  { name: "signal", load: async () => (await import("./signal.js")).signalCommand },
  { name: "approve", load: async () => (await import("./approve.js")).approveCommand },
  { name: "rerun", load: async () => (await import("./rerun.js")).rerunCommand },
  { name: "cancel", load: async () => (await import("./cancel.js")).cancelCommand },
  { name: "secret", load: async () => (await import("./secret.js")).secretCommand },
  { name: "credential", load: async () => (await import("./credential.js")).credentialCommand },
  { name: "account", load: async () => (await import("./account.js")).accountCommand },
  { name: "member", load: async () => (await import("./member.js")).memberCommand },
  { name: "events", load: async () => (await import("./events.js")).eventsCommand },
  { name: "emit", load: async () => (await import("./emit.js")).emitCommand },
  { name: "event-hook", load: async () => (await import("./event-hook.js")).eventHookCommand },
  { name: "handler", load: async () => (await import("./handler.js")).handlerCommand },
  { name: "schedule", load: async () => (await import("./schedule.js")).scheduleCommand },
  { name: "agents", load: async () => (await import("./agents.js")).agentsCommand },
  { name: "graph", load: async () => (await import("./graph.js")).graphCommand },
  { name: "login", load: async () => (await import("./login.js")).loginCommand },
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

const commandPath = (cmd: Command): string => {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
};

/** Routes commander's output through the CLI's stdio and turns its exits into thrown errors. */
const configure = (cmd: Command, deps: CliDeps): void => {
  cmd.configureHelp({ showGlobalOptions: true });
  cmd.configureOutput({
    writeOut: (text) => void deps.io.write(text),
    writeErr: (text) => deps.io.note(text.replace(/\n$/, "")),
    outputError: () => undefined, // runCli prints it, with a hint
  });
  cmd.exitOverride((err) => {
    if (err.exitCode === 0) throw err; // --help, --version
    const path = commandPath(cmd);
    const message =
      err.code === "commander.help" ? `\`${path}\` needs a ${cmd.parent ? "subcommand" : "command"}` : err.message.replace(/^error: /, "");
    throw new FlowError("invalid_argument", message, { hint: `see \`${path} --help\``, cause: err });
  });
  for (const sub of cmd.commands) configure(sub, deps);
};

/** The program, with the commands `argv` needs (commandsFor), or with all of them when no argv is given. */
export const buildProgram = async (deps: CommandDeps, argv?: readonly string[]): Promise<Command> => {
  const factories = await Promise.all(commandsFor(argv).map((c) => c.load()));
  const program = new Command("flow")
    .description("flowsvc: submit and inspect durable workflow runs, manage secrets and events")
    .version(cliVersion(), "-V, --version")
    .option("--url <url>", "the flowsvc API (env FLOWSVC_URL, else the saved config, else http://127.0.0.1:8080)", parseUrlFlag)
    .option("--token <token>", "API token (env FLOWSVC_TOKEN, else the saved config)")
    .option(
      "--project <org/project>",
      "the project to act on (env FLOWSVC_PROJECT, else the saved config, else default/default)",
      parseProjectFlag,
    )
    .addHelpText(
      "after",
      examples("flow server", 'run=$(flow submit build.sh) && flow follow "$run"', "flow runs ls --status failed -o json"),
    );
  for (const make of factories) program.addCommand(make(deps));
  configure(program, deps);
  return program;
};

/** Runs the user CLI on `argv` (process.argv shape) and answers the exit status. */
export const runCli = async (argv: readonly string[], deps: CliDeps): Promise<number> => {
  let status = 0;
  try {
    const program = await buildProgram({ ...deps, setExitCode: (code) => (status = code) }, argv);
    await program.parseAsync([...argv]);
    return status;
  } catch (err) {
    if (err instanceof CommanderError && err.exitCode === 0) return 0;
    return printError(deps.io, err);
  }
};
