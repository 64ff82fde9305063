/** `flow annotate <markdown|->`: attaches a markdown note to the run (no durable boundary). */
import { agentSocket, simpleCall, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";
import { readStdin } from "./io.js";

export const annotateCommand: InScriptCommand = {
  name: "annotate",
  usage: "flow annotate <markdown|->",
  summary: "Attaches a markdown note to the run; - reads it from stdin.",
  example: 'flow annotate "Deployed **1.4.2** to staging"',
  async run(args, env) {
    const [markdown] = args;
    if (markdown === undefined) throw usageError(this, "missing markdown");
    if (args.length > 1) throw usageError(this, "takes one argument (quote the markdown, or pass - to read stdin)");
    agentSocket(env, this.name); // before stdin is consumed
    const text = markdown === "-" ? readStdin().toString("utf8") : markdown;
    return simpleCall(env, this.name, { id: 1, op: "annotate", markdown: text });
  },
};
