/**
 * `flow state get <key> | set <key> <value|-> | delete <key> | list [--entity <name>]`: state
 * that is run-private, or project-wide under --entity. Not checkpointed: it runs on every pass.
 */
import { parseArgs } from "./args.js";
import { agentSocket, simpleCall, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";
import { readStdin } from "./io.js";

/** How many words each action takes, the action included. */
const WORDS: Readonly<Record<string, number>> = { list: 1, get: 2, delete: 2, set: 3 };

/** stdin with one trailing newline stripped. */
const stdinValue = (): string => {
  const bytes = readStdin();
  return (bytes.at(-1) === 10 ? bytes.subarray(0, -1) : bytes).toString("utf8");
};

export const stateCommand: InScriptCommand = {
  name: "state",
  usage: "flow state get <key> | set <key> <value|-> | delete <key> | list [--entity <name>]",
  summary: "Reads and writes state, run-private or project-wide with --entity; set takes JSON or a bare string, - reads stdin.",
  example: "flow state set version 1.4.2 --entity prod",
  async run(args, env) {
    const parsed = parseArgs(this, args, { single: ["entity"], maxPositionals: Infinity });
    const [action, key, value] = parsed.positionals;
    if (action === undefined) throw usageError(this, "missing action (get, set, delete or list)");
    const want = Object.hasOwn(WORDS, action) ? (WORDS[action] as number) : 0;
    if (want === 0) throw usageError(this, `unknown action ${action}`);
    if (want > 1 && !key) throw usageError(this, "missing key");
    if (want > 2 && value === undefined) throw usageError(this, "missing value (or - for stdin)");
    if (parsed.positionals.length > want) throw usageError(this, `unexpected argument ${parsed.positionals[want]}`);
    agentSocket(env, this.name); // before stdin is consumed
    return simpleCall(env, this.name, {
      id: 1,
      op: this.name,
      action,
      key: want > 1 ? key : undefined,
      entity: parsed.values.get("entity"),
      value: want > 2 ? (value === "-" ? stdinValue() : value) : undefined,
    });
  },
};
