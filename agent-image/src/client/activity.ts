/**
 * `flow activity`, `activity-submit`, `activity-collect` and `activity-wait-all`: children run by
 * other agents (with `--requires` capabilities); collect prints a child's stdout and exits with
 * its code, wait-all prints the count of failed uncollected children.
 */
import { parseArgs } from "./args.js";
import { simpleCall, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";

/** activity and activity-submit take the same words; the op is the command's name. */
const dispatchCommand = (name: "activity" | "activity-submit", summary: string, example: string): InScriptCommand => ({
  name,
  usage: `flow ${name} <name> [--requires <capability>]... -- <cmd...>`,
  summary,
  example,
  async run(args, env) {
    const parsed = parseArgs(this, args, { multi: ["requires"], maxPositionals: 1, takesCommand: true });
    const [activity] = parsed.positionals;
    const { cmd } = parsed;
    if (!activity) throw usageError(this, "missing activity name");
    if (cmd === undefined) throw usageError(this, "missing -- before the command");
    if (cmd.length === 0) throw usageError(this, "missing command after --");
    const requires = parsed.lists.get("requires") ?? [];
    return simpleCall(env, this.name, { id: 1, op: this.name, name: activity, argv: cmd, requires });
  },
});

export const activityCommand = dispatchCommand(
  "activity",
  "Runs <cmd> on an agent with those capabilities, prints its stdout and exits with its code.",
  "flow activity render --requires gpu -- ./render.sh scene.blend",
);

export const activitySubmitCommand = dispatchCommand(
  "activity-submit",
  "Starts <cmd> on an agent with those capabilities and returns; flow activity-collect <name> waits for it.",
  "flow activity-submit shard-1 -- ./process.sh 1",
);

export const activityCollectCommand: InScriptCommand = {
  name: "activity-collect",
  usage: "flow activity-collect <name>",
  summary: "Waits for a submitted activity, prints its stdout and exits with its code.",
  example: "flow activity-collect shard-1",
  async run(args, env) {
    const [name] = parseArgs(this, args, { maxPositionals: 1 }).positionals;
    if (!name) throw usageError(this, "missing activity name");
    return simpleCall(env, this.name, { id: 1, op: this.name, name });
  },
};

export const activityWaitAllCommand: InScriptCommand = {
  name: "activity-wait-all",
  usage: "flow activity-wait-all",
  summary: "Waits for this script's uncollected activities and prints how many failed; exits 0.",
  example: "failed=$(flow activity-wait-all)",
  async run(args, env) {
    parseArgs(this, args, { maxPositionals: 0 });
    return simpleCall(env, this.name, { id: 1, op: this.name });
  },
};
