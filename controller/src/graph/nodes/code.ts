/**
 * `code` and `shell` nodes: a script on an agent, as a job of the graph run (the engine's `job`
 * outcome). `code`: `source` in any interpreter (`interpreter`, a string or an argv, default by
 * `filename`'s extension, else bash); `shell`: `command`, run by `bash -eu`. Both take
 * `credentials` (ENV_VAR -> credential name, resolved at claim exactly like a script's
 * `--credential`: all or the job fails), `env` and `requires` (agent capabilities). Output: the
 * script's `flow output set` values, `exit_code` and the tail of its stdout.
 */
import { assertCredentialMap, pickInterpreter } from "@flowsvc/core";
import type { NodeExecutor } from "./types.js";
import { asConfig, requiredStr, str, stringList, stringMap } from "./config.js";

export const codeExecutor: NodeExecutor = {
  type: "code",
  start: (ctx) => {
    const c = asConfig(ctx.config);
    const source = requiredStr(c, "source");
    const filename = str(c, "filename") ?? `${ctx.node.id}.sh`;
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
