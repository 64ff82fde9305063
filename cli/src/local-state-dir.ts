/**
 * Where local runs (`flow run`) keep their state, without the local engine: the user CLI's `flow
 * signal` asks here (a path and one stat) whether a run id is a local run before it loads the
 * local engine (cli/src/local, ES modules and zod) or sends its request (issue 15: start-up).
 * cli/src/local/config.ts re-exports these (with the process environment as the default); node:fs,
 * node:os and node:path only.
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";

export type LocalEnvironment = Readonly<Record<string, string | undefined>>;

/**
 * The local state directory: $XDG_STATE_HOME/flowsvc/local, else ~/.local/state/flowsvc/local. A
 * relative or blank XDG_STATE_HOME is ignored, as the XDG base directory spec says; HOME falls back
 * to the account's home directory.
 */
export const localStateDir = (env: LocalEnvironment): string => {
  const xdg = env["XDG_STATE_HOME"]?.trim();
  if (xdg && isAbsolute(xdg)) return join(xdg, "flowsvc", "local");
  const home = env["HOME"]?.trim() || homedir();
  return join(home, ".local", "state", "flowsvc", "local");
};

/** `<state>/runs/<run-id>`: a local run's directory (local-run-dir.ts checks the id before it joins). */
export const localRunPath = (stateDir: string, runId: string): string => join(stateDir, "runs", runId);

/**
 * The answers mayBeLocalRun gave in this process, by directory. On globalThis, not in this module:
 * the bundle's entry (flow.cjs) and the command's own bundle each inline this module, and the entry's
 * answer is the one the command must act on (below).
 */
const DECIDED = Symbol.for("flowsvc.mayBeLocalRun");
const decided = (): Map<string, boolean> => {
  const store = globalThis as { [DECIDED]?: Map<string, boolean> };
  return (store[DECIDED] ??= new Map<string, boolean>());
};

/**
 * Whether `runId` may be a local run on this machine: its directory exists (a run id only; a text
 * that could leave the runs directory is not one). False means the signal goes to the server
 * without the local engine; true lets local-signal.ts decide (a directory left by a killed run).
 * Decided once per process: a later call answers what the first one saw. The bundle's entry asks
 * first (a local run's signal imports the local engine, so its bundle must not run from the code
 * cache, where import() fails) and signal.ts acts on that same answer: a `flow run` that starts
 * between the two cannot make the command import() from a cached bundle. Its signal goes to the
 * server, as it would have a moment earlier.
 */
export const mayBeLocalRun = (runId: string, env: LocalEnvironment): boolean => {
  if (!runId.startsWith("run-") || /[/\\\0]/.test(runId)) return false;
  const dir = localRunPath(localStateDir(env), runId);
  const known = decided().get(dir);
  if (known !== undefined) return known;
  const exists = existsSync(dir);
  decided().set(dir, exists);
  return exists;
};
