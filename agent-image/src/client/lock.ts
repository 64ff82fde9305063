/**
 * `flow lock <group> [-- <cmd...>]`: bare, one `lock` call (the lease is held until the run ends);
 * bracketed, `lock`, a step named `lock:<group>` that runs the command like `flow step`, and
 * `unlock` once that step has a result, on replay too (docs/internals.md, "Bracketed lock").
 */
import { parseArgs } from "./args.js";
import { agentSocket, usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";
import { AgentConnection } from "./connection.js";
import { applyResponse } from "./response.js";
import { runStep } from "./step.js";

export const lockCommand: InScriptCommand = {
  name: "lock",
  usage: "flow lock <group> [-- <cmd...>]",
  summary: "Takes the project-wide lease <group>: bare, held until the run ends; with a command, released when it ends.",
  example: "flow lock deploy-prod -- ./deploy.sh",
  async run(args, env) {
    const { positionals, cmd } = parseArgs(this, args, { maxPositionals: 1, takesCommand: true });
    const [group] = positionals;
    if (!group) throw usageError(this, "missing lock group");
    if (cmd?.length === 0) throw usageError(this, "missing command after --");
    const connection = await AgentConnection.open(agentSocket(env, this.name));
    try {
      const locked = await connection.call({ id: 1, op: "lock", group });
      const code = applyResponse(locked, 0);
      if (cmd === undefined || !locked.ok || code !== 0) return code;
      const step = await runStep(connection, { name: `lock:${group}`, label: undefined, cmd }, env, 2);
      if (!step.ended) return step.code;
      const unlocked = await connection.call({ id: step.nextId, op: "unlock", group });
      const released = applyResponse(unlocked, step.code);
      return unlocked.ok && released === 0 ? step.code : released; // the command's code, unless the release failed
    } finally {
      connection.close();
    }
  },
};
