/** `flow output set <k>=<v>...`: stages keys merged into the run's output on a successful exit. */
import { simpleCall, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";
import { RawJson } from "./connection.js";

/** A JSON object text with keys in first-seen order; a repeated key takes its last value. */
const jsonObject = (values: ReadonlyMap<string, string>): string =>
  `{${[...values].map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(",")}}`;

export const outputCommand: InScriptCommand = {
  name: "output",
  usage: "flow output set <key>=<value>...",
  summary: "Stages keys for the run's output, committed when the script exits 0.",
  example: "flow output set version=1.4.2 url=https://example.test",
  async run(args, env) {
    const [sub, ...pairs] = args;
    if (sub === undefined) throw usageError(this, "missing subcommand (set)");
    if (sub !== "set") throw usageError(this, `unknown subcommand ${sub}`);
    if (pairs.length === 0) throw usageError(this, "missing <key>=<value>");
    const values = new Map<string, string>();
    for (const pair of pairs) {
      const eq = pair.indexOf("=");
      if (eq <= 0) throw usageError(this, `expected <key>=<value>, got ${pair}`);
      values.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    // `values` goes in as raw JSON text so that key order survives (a JS object would move
    // integer-like keys first); the native client writes the same bytes.
    return simpleCall(env, this.name, { id: 1, op: "output.set", values: new RawJson(jsonObject(values)) });
  },
};
