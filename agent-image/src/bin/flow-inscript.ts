/**
 * The Node fallback of the in-script `flow` client, for hosts without a C compiler
 * (agent-image/bin/flow is a shim that execs this when the native client was not built).
 * It starts lean: the client needs only node:net, node:child_process and node:fs; the user CLI
 * is found and run only for commands that are not in-script (client/user-cli.ts).
 */
import { runsInScript } from "../client/commands.js";
import { readClientConfig } from "../client/config.js";
import { runInScriptCommand } from "../client/run.js";

const { argv, env } = readClientConfig();
const code = runsInScript(argv[0], env)
  ? await runInScriptCommand(argv, env)
  : await (await import("../client/user-cli.js")).runUserCli(argv, env);
if (code !== undefined) process.exit(code);
