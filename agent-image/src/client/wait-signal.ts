/**
 * `flow wait-signal <name> [--timeout <duration>]`: takes the next signal of that name and prints
 * its payload; a bounded wait that times out exits 124. Names starting `event:` belong to event
 * waits. A bounded wait needs socket protocol v2 (docs/internals.md, "Bounded waits").
 */
import { parseArgs } from "./args.js";
import { simpleCall, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";

export const waitSignalCommand: InScriptCommand = {
  name: "wait-signal",
  usage: "flow wait-signal <name> [--timeout <duration>]",
  summary: "Waits for the next signal <name> and prints its payload JSON; a --timeout that elapses exits 124.",
  example: "flow wait-signal approve --timeout 2h",
  async run(args, env) {
    const parsed = parseArgs(this, args, { single: ["timeout"], maxPositionals: 1 });
    const [name] = parsed.positionals;
    const timeout = parsed.values.get("timeout");
    if (!name) throw usageError(this, "missing signal name");
    if (name.startsWith("event:")) {
      throw usageError(this, `names starting with "event:" are reserved for event waits (flow wait-event): ${name}`);
    }
    if (timeout === "") throw usageError(this, "--timeout needs a value");
    // minProtocol 2: a hello first, and checkProtocol refuses an older agent at the call site.
    return simpleCall(env, this.name, { id: 1, op: "wait-signal", name, timeout }, timeout === undefined ? 1 : 2);
  },
};
