/**
 * `flow call node <kind> [--config <json>]`, `flow call graph <name> [--input <json>]`,
 * `flow call graph --definition <file|-> [--input <json>]`: runs a child graph, waits for it and
 * prints its output as JSON (exit 0); its failure exits 1 with its error. Checkpointed by position
 * on the agent's side: a replay prints the recorded output and starts no child.
 */
import { parseArgs } from "./args.js";
import { agentSocket, simpleCall, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";
import { RawJson } from "./connection.js";
import { compactJson } from "./event-args.js";
import { readInputFile, readStdin } from "./io.js";

const jsonFlag = (cmd: InScriptCommand, flag: string, text: string | undefined): RawJson | undefined => {
  if (text === undefined) return undefined;
  const json = compactJson(text);
  if (json === undefined) throw usageError(cmd, `--${flag} is not valid JSON`);
  return new RawJson(json);
};

export const callCommand: InScriptCommand = {
  name: "call",
  usage:
    "flow call node <kind> [--config <json>] | flow call graph <name> [--input <json>] | flow call graph --definition <file|-> [--input <json>]",
  summary: "Runs a child graph (one node, a stored graph, or a document), waits for it and prints its output as JSON.",
  example: 'flow call node emit --config \'{"type":"built"}\'',
  async run(args, env) {
    const parsed = parseArgs(this, args, { single: ["config", "input", "definition"], maxPositionals: 2 });
    const [what, name] = parsed.positionals;
    const config = jsonFlag(this, "config", parsed.values.get("config"));
    const input = jsonFlag(this, "input", parsed.values.get("input"));
    const definition = parsed.values.get("definition");
    if (what === "node") {
      if (!name) throw usageError(this, "missing node kind");
      if (input !== undefined || definition !== undefined) throw usageError(this, "flow call node takes --config only");
      return simpleCall(env, this.name, { id: 1, op: "call", node: name, config });
    }
    if (what !== "graph") throw usageError(this, `expected node or graph, got ${what ?? "nothing"}`);
    if (config !== undefined) throw usageError(this, "flow call graph takes --input, not --config");
    if ((name === undefined) === (definition === undefined)) throw usageError(this, "give a stored graph's name or --definition <file|->");
    if (name !== undefined) return simpleCall(env, this.name, { id: 1, op: "call", graph: name, input });
    agentSocket(env, this.name); // before stdin is consumed
    const source = definition === "-" ? readStdin() : readInputFile(definition!);
    return simpleCall(env, this.name, { id: 1, op: "call", definition_b64: source.toString("base64"), input });
  },
};
