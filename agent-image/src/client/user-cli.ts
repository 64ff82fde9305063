/**
 * Hands a command that is not in-script (submit, follow, secret, emit outside a script, ...) to
 * the user CLI. The agent does not ship the user CLI (its image has only agent-image/ and core/),
 * so the CLI is found as a user would: `$FLOW_USER_CLI` when set, else the first `flow` on PATH
 * that is not an in-script client (a `flow` whose real file lies in this agent's bin/ or
 * bin-node/). agent-image/native/flow.c follows the same rule with the same messages.
 *
 * A CLI whose real file is JavaScript (the npm-installed `flow` is a link to cli/dist/bin/flow.js
 * style entry) is loaded in this process: a second Node start-up would cost another ~100 ms.
 * Anything else is run as a child with this process's stdio, and its exit status is answered.
 */
import { spawnSync } from "node:child_process";
import { accessSync, constants, realpathSync, statSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { say } from "./io.js";

/** The PATH a script gets when the agent has none (activity-env.ts, script-job.ts). */
const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";

export const NO_USER_CLI = [
  "error: the flow user CLI is not installed here: no flow on PATH but the in-script client, and FLOW_USER_CLI is not set",
  "put the flow CLI on PATH or set FLOW_USER_CLI to its path; in-script commands (flow step, flow sleep, ...) work without it",
] as const;

/** This file is <agent-image>/dist/client/user-cli.js; the in-script clients are <agent-image>/bin*. */
const inScriptDirs = (): string[] => {
  const agentRoot = realpathSync(fileURLToPath(new URL("../../", import.meta.url)));
  return [join(agentRoot, "bin"), join(agentRoot, "bin-node")];
};

const executableFile = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
};

const realDir = (path: string): string | undefined => {
  try {
    return dirname(realpathSync(path));
  } catch {
    return undefined;
  }
};

/**
 * The user CLI's path: `$FLOW_USER_CLI` as given (checked by runUserCli), else the first
 * executable `flow` in an absolute PATH entry that is not an in-script client; undefined when none.
 */
export const findUserCli = (
  env: Readonly<Record<string, string | undefined>>,
  skipDirs: readonly string[] = inScriptDirs(),
): string | undefined => {
  if (env["FLOW_USER_CLI"]) return env["FLOW_USER_CLI"];
  for (const dir of (env["PATH"] ?? DEFAULT_PATH).split(":")) {
    if (!dir.startsWith("/")) continue; // an empty or relative entry would search the script's cwd
    const candidate = join(dir, "flow");
    if (!executableFile(candidate)) continue;
    const real = realDir(candidate);
    if (real !== undefined && !skipDirs.includes(real)) return candidate;
  }
  return undefined;
};

/** A shell's exit status: the child's, or 128 + the number of the signal that ended it. */
const exitStatusOf = (r: ReturnType<typeof spawnSync>): number => {
  if (r.status !== null) return r.status;
  return r.signal === null ? 1 : 128 + osConstants.signals[r.signal];
};

/**
 * Runs the user CLI on `args` (the words after `flow`). Answers an exit status, or undefined when
 * the CLI was loaded in this process (it parses process.argv itself and owns the exit status).
 */
export const runUserCli = async (
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): Promise<number | undefined> => {
  const cli = findUserCli(env);
  if (cli === undefined) {
    say(2, ...NO_USER_CLI);
    return 1;
  }
  if (!executableFile(cli)) {
    say(2, `error: FLOW_USER_CLI=${cli} is not an executable file`);
    return 1;
  }
  const real = realpathSync(cli);
  if (/\.[cm]?js$/.test(real)) {
    process.argv = [process.argv[0] ?? process.execPath, real, ...args]; // as if node had been started on the CLI itself
    await import(pathToFileURL(real).href);
    return undefined;
  }
  const r = spawnSync(cli, args, { stdio: "inherit", env });
  if (r.error) {
    say(2, `error: cannot run the flow user CLI (${cli}): ${r.error.message}`);
    return 1;
  }
  return exitStatusOf(r);
};
