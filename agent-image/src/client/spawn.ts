/**
 * `flow spawn <file|-> [--as pipeline|script] [--tag <tag>]...`: submits the file (or stdin) as
 * an independent run and prints its id; checkpointed by position on the agent's side.
 */
import { parseArgs } from "./args.js";
import { agentSocket, simpleCall, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";
import { readInputFile, readStdin } from "./io.js";

export const spawnCommand: InScriptCommand = {
  name: "spawn",
  usage: "flow spawn <file|-> [--as pipeline|script] [--tag <tag>]...",
  summary: "Submits <file> (- reads stdin) as an independent run and prints its id.",
  example: "child=$(flow spawn nightly.sh --tag nightly)",
  async run(args, env) {
    const parsed = parseArgs(this, args, { single: ["as"], multi: ["tag"], maxPositionals: 1 });
    const [file] = parsed.positionals;
    const as = parsed.values.get("as");
    if (!file) throw usageError(this, "missing file (a path, or - for stdin)");
    if (as !== undefined && as !== "pipeline" && as !== "script") throw usageError(this, `--as takes pipeline or script, got ${as}`);
    agentSocket(env, this.name); // before stdin is consumed
    const fromStdin = file === "-";
    const source = fromStdin ? readStdin() : readInputFile(file);
    return simpleCall(env, this.name, {
      id: 1,
      op: this.name,
      source_b64: source.toString("base64"),
      filename: fromStdin ? "stdin.sh" : file.slice(file.lastIndexOf("/") + 1),
      as: as ?? "script",
      tags: parsed.lists.get("tag") ?? [],
    });
  },
};
