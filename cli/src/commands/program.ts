/**
 * The user CLI: builds the commander program and runs it. Errors come back here and are printed
 * once (`error: ...`, then the hint); commander's usage errors become exit status 2.
 */
import { createRequire } from "node:module";
import { Command, CommanderError } from "commander";
import { FlowError } from "@flowsvc/core";
import { printError } from "../print-error.js";
import type { CliDeps, CommandDeps } from "./context.js";
import { emitCommand } from "./emit.js";
import { eventHookCommand } from "./event-hook.js";
import { eventsCommand } from "./events.js";
import { followCommand } from "./follow.js";
import { handlerCommand } from "./handler.js";
import { loginCommand } from "./login.js";
import { examples, parseProjectFlag, parseUrlFlag } from "./options.js";
import { needsServerCommand } from "./route.js";
import { cancelCommand } from "./cancel.js";
import { credentialCommand } from "./credential.js";
import { rerunCommand } from "./rerun.js";
import { runCommand } from "./run.js";
import { runsCommand } from "./runs.js";
import { signalCommand } from "./signal.js";
import { secretCommand } from "./secret.js";
import { statusCommand } from "./status.js";
import { stepsCommand } from "./steps.js";
import { submitCommand } from "./submit.js";

const version = (): string => (createRequire(import.meta.url)("../../package.json") as { version: string }).version;

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

/**
 * The program; `server` is the lead's `flow server` command when this invocation needs it
 * (see needsServerCommand), else left out.
 */
export const buildProgram = (deps: CommandDeps, server?: Command): Command => {
  const program = new Command("flow")
    .description("flowsvc: submit and inspect durable workflow runs, manage secrets and events")
    .version(version(), "-V, --version")
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
  for (const make of [
    submitCommand,
    followCommand,
    runsCommand,
    statusCommand,
    stepsCommand,
    signalCommand,
    rerunCommand,
    cancelCommand,
    secretCommand,
    credentialCommand,
    eventsCommand,
    emitCommand,
    eventHookCommand,
    handlerCommand,
    loginCommand,
  ]) {
    program.addCommand(make(deps));
  }
  program.addCommand(runCommand(deps));
  if (server) program.addCommand(server);
  configure(program, deps);
  return program;
};

/** Runs the user CLI on `argv` (process.argv shape) and answers the exit status. */
export const runCli = async (argv: readonly string[], deps: CliDeps): Promise<number> => {
  let status = 0;
  try {
    const server = needsServerCommand(argv) ? (await import("../server/command.js")).serverCommand() : undefined;
    const program = buildProgram({ ...deps, setExitCode: (code) => (status = code) }, server);
    await program.parseAsync([...argv]);
    return status;
  } catch (err) {
    if (err instanceof CommanderError && err.exitCode === 0) return 0;
    return printError(deps.io, err);
  }
};
