/**
 * `flow wait-event <type> [--timeout <duration>]`: parks until the next event of that type after
 * the wait began and prints its whole envelope as JSON; a bounded wait that times out exits 124.
 * A bounded wait needs socket protocol v2 (docs/internals.md, "Bounded waits").
 */
import { parseArgs } from "./args.js";
import { simpleCall, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";
import { isEventType } from "./event-args.js";

export const waitEventCommand: InScriptCommand = {
  name: "wait-event",
  usage: "flow wait-event <type> [--timeout <duration>]",
  summary: "Waits for the next event <type> after the wait began and prints its envelope JSON; a --timeout that elapses exits 124.",
  example: "flow wait-event deploy.done --timeout 1h",
  async run(args, env) {
    const parsed = parseArgs(this, args, { single: ["timeout"], maxPositionals: 1 });
    const [type] = parsed.positionals;
    const timeout = parsed.values.get("timeout");
    if (!type) throw usageError(this, "missing event type");
    if (!isEventType(type)) throw usageError(this, `an event type is 1-64 characters from [A-Za-z0-9._-], got ${type}`);
    if (timeout === "") throw usageError(this, "--timeout needs a value");
    // minProtocol 2: a hello first, and checkProtocol refuses an older agent at the call site.
    return simpleCall(env, this.name, { id: 1, op: "wait-event", type, timeout }, timeout === undefined ? 1 : 2);
  },
};
