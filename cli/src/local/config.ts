/**
 * Where local runs (`flow run`) keep their state, and the one file of cli/src/local that reads
 * `process.env`: $XDG_STATE_HOME/flowsvc/local, else ~/.local/state/flowsvc/local.
 *
 * Callers that already hold the environment (the user CLI gets it from bin/flow.ts) pass it in;
 * the default is the process environment, for callers that have none at hand.
 */
import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";

export type LocalEnvironment = Readonly<Record<string, string | undefined>>;

/** The process environment (only for callers that were not handed one). */
export const localProcessEnvironment = (): LocalEnvironment => process.env;

/**
 * The local state directory. A relative or blank XDG_STATE_HOME is ignored, as the XDG base
 * directory spec says; HOME falls back to the account's home directory.
 */
export const localStateDir = (env: LocalEnvironment = localProcessEnvironment()): string => {
  const xdg = env["XDG_STATE_HOME"]?.trim();
  if (xdg && isAbsolute(xdg)) return join(xdg, "flowsvc", "local");
  const home = env["HOME"]?.trim() || homedir();
  return join(home, ".local", "state", "flowsvc", "local");
};
