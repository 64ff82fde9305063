/** runInScriptCommand: the Node in-script client's entry, shared by flow-inscript and the user CLI. */
import type { ClientEnv } from "./command-kit.js";
import { agentSocket, helpText, wantsHelp } from "./command-kit.js";
import { COMMANDS, IN_SCRIPT_COMMANDS, isInScriptCommand } from "./commands.js";
import { ClientError, say, writeAll } from "./io.js";

const dispatch = async (argv: readonly string[], env: ClientEnv): Promise<number> => {
  const [name = "", ...args] = argv;
  if (!isInScriptCommand(name)) {
    throw new ClientError([`error: flow ${name} is not an in-script command`, `in-script commands: ${IN_SCRIPT_COMMANDS.join(", ")}`], 2);
  }
  const load = COMMANDS[name];
  if (load === undefined) {
    agentSocket(env, name);
    throw new ClientError([`error: flow ${name} is not supported by this version of the in-script client`]);
  }
  const command = await load();
  if (wantsHelp(args)) {
    writeAll(1, Buffer.from(helpText(command), "utf8"));
    return 0;
  }
  return command.run(args, env);
};

/**
 * Runs one in-script command (`argv` starts at the command name, e.g. `["step", "build", "--",
 * "make"]`) against the agent at env.FLOW_AGENT_SOCKET. Writes to fds 1 and 2 and returns the
 * exit status; it never exits the process.
 */
export const runInScriptCommand = async (argv: string[], env: Record<string, string | undefined>): Promise<number> => {
  try {
    return await dispatch(argv, env);
  } catch (err) {
    if (err instanceof ClientError) {
      say(2, ...err.lines);
      return err.exitCode;
    }
    say(2, `error: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
};
