/**
 * `flow emit <type> [--key <subject>] [--payload <json>]` inside a script: publishes an event and
 * prints its id. Checkpointed by position on the agent's side: a replay prints the same id and the
 * first attempt's payload stands. `--payload` must be JSON (default null); it travels as JSON.
 * Outside a script `flow emit` is the user CLI's (HTTP); bin/flow-inscript.ts routes it.
 */
import { parseArgs } from "./args.js";
import { simpleCall, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";
import { RawJson } from "./connection.js";
import { compactJson, isEventType } from "./event-args.js";

export const emitCommand: InScriptCommand = {
  name: "emit",
  usage: "flow emit <type> [--key <subject>] [--payload <json>]",
  summary: "Publishes an event on the project's bus and prints its id; a replay prints the same id.",
  example: 'flow emit deploy.done --key acme/web --payload \'{"version":"1.4.2"}\'',
  async run(args, env) {
    const parsed = parseArgs(this, args, { single: ["key", "payload"], maxPositionals: 1 });
    const [type] = parsed.positionals;
    const key = parsed.values.get("key");
    const payload = parsed.values.get("payload");
    if (!type) throw usageError(this, "missing event type");
    if (!isEventType(type)) throw usageError(this, `an event type is 1-64 characters from [A-Za-z0-9._-], got ${type}`);
    if (key === "") throw usageError(this, "--key needs a value");
    const json = payload === undefined ? undefined : compactJson(payload);
    if (payload !== undefined && json === undefined) {
      throw usageError(this, "--payload is not valid JSON (a string needs its quotes: --payload '\"text\"')");
    }
    return simpleCall(env, this.name, { id: 1, op: "emit", type, key, payload: json === undefined ? undefined : new RawJson(json) });
  },
};
