/** The Node in-script `flow` client (the fallback of agent-image/native/flow.c). */
export { IN_SCRIPT_COMMANDS, SHARED_COMMANDS, isInScriptCommand, runsInScript } from "./commands.js";
export type { InScriptCommandName } from "./commands.js";
export { runInScriptCommand } from "./run.js";
