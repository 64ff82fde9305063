/**
 * `code` and `shell` nodes: a script on an agent, as a job of the graph run (the engine's `job`
 * outcome). `code`: `source` in any interpreter (`interpreter`, the command split on spaces,
 * default `bash -eu`); `shell`: `command`, run by `bash -eu`. Both take
 * `credentials` (ENV_VAR -> credential name, resolved at claim exactly like a script's
 * `--credential`: all or the job fails), `env` and `requires` (an agent capability). Output: the
 * script's `flow output set` values, `exit_code` and the tail of its stdout.
 */
import { FlowError, assertCredentialMap, pickInterpreter } from "@flowsvc/core";
import type { NodeExecutor } from "./types.js";
import { asConfig, requiredStr, stringList, stringMap } from "./config.js";

export const codeExecutor: NodeExecutor = {
  type: "code",
  start: (ctx) => {
    const c = asConfig(ctx.config);
    if (c["file"] !== undefined)
      throw new FlowError("invalid_argument", "config.file: a code node runs its `source` in this version; put the script's text there");
    const source = requiredStr(c, "source");
    const filename = `${ctx.node.id}.sh`;
    const interpreter = stringList(c, "interpreter") ?? pickInterpreter(filename);
    const credentials = stringMap(c, "credentials");
    assertCredentialMap(credentials, "config.credentials");
    const job = { source, filename, interpreter, credentials, env: stringMap(c, "env"), capabilities: stringList(c, "requires") ?? [] };
    return Promise.resolve({ kind: "job", job });
  },
};

export const shellExecutor: NodeExecutor = {
  type: "shell",
  start: (ctx) => {
    const c = asConfig(ctx.config);
    const credentials = stringMap(c, "credentials");
    assertCredentialMap(credentials, "config.credentials");
    const job = {
      source: requiredStr(c, "command"),
      filename: `${ctx.node.id}.sh`,
      interpreter: ["bash", "-eu"],
      credentials,
      env: stringMap(c, "env"),
      capabilities: stringList(c, "requires") ?? [],
    };
    return Promise.resolve({ kind: "job", job });
  },
};
