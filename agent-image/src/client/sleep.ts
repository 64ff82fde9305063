/**
 * `flow sleep <duration>`: parks the run; the agent frees its slot and the run's next job replays the
 * script on wake. A parked call gets no answer (the agent ends the script's process group), so
 * the client waits without a timeout and prints nothing when it is killed.
 */
import { parseArgs } from "./args.js";
import { simpleCall, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";

export const sleepCommand: InScriptCommand = {
  name: "sleep",
  usage: "flow sleep <duration>",
  summary: "Parks the run for <duration> (5s, 1m, 2h, 30d) and frees the agent; the script replays from the top on wake.",
  example: "flow sleep 10m",
  async run(args, env) {
    const [duration] = parseArgs(this, args, { maxPositionals: 1 }).positionals;
    if (!duration) throw usageError(this, "missing duration");
    // The agent parses the humantime text.
    return simpleCall(env, this.name, { id: 1, op: "sleep", duration });
  },
};
