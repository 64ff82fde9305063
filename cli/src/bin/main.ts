/**
 * The `flow` binary's program (flow.ts loads it, bundled or not). In-script calls (step, sleep, wait-signal, ...) take a fast path to the
 * in-script client without loading commander or zod: a script runs them on every replay.
 * Everything else is the user CLI in ../commands/program.ts.
 */
import { processEnvironment } from "../config.js";
import type { Environment } from "../config.js";
import { mayBeInScript } from "../commands/route.js";
import { guardStdout, processStdio } from "../print.js";
import { cliVersion } from "../version.js";

interface InScriptClient {
  IN_SCRIPT_COMMANDS: readonly string[];
  runInScriptCommand(argv: string[], env: Record<string, string | undefined>): Promise<number>;
}

// A variable, not a literal: the user CLI must build while the in-script client is unfinished.
const IN_SCRIPT_PACKAGE = "@flowsvc/agent/client";

const loadInScriptClient = async (): Promise<InScriptClient | undefined> => {
  const mod = (await import(IN_SCRIPT_PACKAGE)) as Partial<InScriptClient>;
  return Array.isArray(mod.IN_SCRIPT_COMMANDS) && typeof mod.runInScriptCommand === "function" ? (mod as InScriptClient) : undefined;
};

/** `flow --version` alone: answered here, before the program (commander and a command) is loaded. */
const isVersionOnly = (argv: readonly string[]): boolean => argv.length === 3 && (argv[2] === "--version" || argv[2] === "-V");

/** A CommandSpec's command invoked plainly runs without commander (fast.ts); anything else through the commander program. */
const runUserCli = async (argv: string[], env: Environment): Promise<number> => {
  const { runFast } = await import("../commands/fast.js");
  const deps = { env, io: processStdio(), now: () => new Date() };
  const status = await runFast(argv, deps);
  if (status !== undefined) return status;
  const { runCli } = await import("../commands/program.js");
  return runCli(argv, deps);
};

const main = async (): Promise<void> => {
  const env = processEnvironment();
  const argv = process.argv;
  if (isVersionOnly(argv)) {
    guardStdout().write(`${cliVersion()}\n`);
    return;
  }
  const command = argv[2] ?? "";
  const client = mayBeInScript(argv, env) ? await loadInScriptClient() : undefined;
  if (client?.IN_SCRIPT_COMMANDS.includes(command)) {
    guardStdout(); // a step's output piped into `head` ends quietly, as before
    process.exit(await client.runInScriptCommand(argv.slice(2), { ...env }));
  }
  process.exitCode = await runUserCli(argv, env);
};

void main();
