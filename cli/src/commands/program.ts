/**
 * The user CLI: builds the commander program and runs it. Errors come back here and are printed
 * once (`error: ...`, then the hint); commander's usage errors become exit status 2.
 */
import { Command, CommanderError } from "commander";
import { FlowError } from "@flowsvc/core/errors";
import { printError } from "../print-error.js";
import { cliVersion } from "../version.js";
import type { CliDeps, CommandDeps } from "./context.js";
import { GLOBAL_OPTIONS, examples } from "./parsers.js";
import { commanderFrom, optionFrom } from "./spec-commander.js";
import { isCommandSpec } from "./spec.js";
import { commandsFor } from "./table.js";

export { commandsFor };
export type { CommandFactory } from "./table.js";

const commandPath = (cmd: Command): string => {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
};

/**
 * commander quotes a refused flag's whole argument (`argument '<value>' is invalid.`): one over 64
 * characters is cut short, and a control character (a NUL) is escaped, so the message stays one
 * readable line.
 */
const shortenArgument = (message: string): string =>
  message.replace(/^(option '[^']*' argument )'([\s\S]*)'( is invalid\.)/, (_all, head: string, arg: string, tail: string) => {
    // eslint-disable-next-line no-control-regex
    const escaped = (arg.length > 64 ? `${arg.slice(0, 64)}...` : arg).replace(/[\u0000-\u001f\u007f]/g, (c) =>
      JSON.stringify(c).slice(1, -1),
    );
    return `${head}'${escaped}'${tail}`;
  });

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
      err.code === "commander.help"
        ? `\`${path}\` needs a ${cmd.parent ? "subcommand" : "command"}`
        : shortenArgument(err.message.replace(/^error: /, ""));
    throw new FlowError("invalid_argument", message, { hint: `see \`${path} --help\``, cause: err });
  });
  for (const sub of cmd.commands) configure(sub, deps);
};

/** The program, with the commands `argv` needs (commandsFor), or with all of them when no argv is given. */
export const buildProgram = async (deps: CommandDeps, argv?: readonly string[]): Promise<Command> => {
  const definitions = await Promise.all(commandsFor(argv).map((c) => c.load()));
  const program = new Command("flow")
    .description("flowsvc: submit and inspect durable workflow runs, manage secrets and events")
    .version(cliVersion(), "-V, --version");
  for (const option of GLOBAL_OPTIONS) program.addOption(optionFrom(option));
  program.addHelpText(
    "after",
    examples("flow server", 'run=$(flow submit build.sh) && flow follow "$run"', "flow runs ls --status failed -o json"),
  );
  for (const definition of definitions) program.addCommand(isCommandSpec(definition) ? commanderFrom(definition, deps) : definition(deps));
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
