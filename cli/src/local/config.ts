/**
 * Where local runs (`flow run`) keep their state, and the one file of cli/src/local that reads
 * `process.env`: $XDG_STATE_HOME/flowsvc/local, else ~/.local/state/flowsvc/local. The rule lives in
 * ../local-state-dir.ts (the user CLI's `flow signal` reads it without loading the local engine).
 *
 * Callers that already hold the environment (the user CLI gets it from bin/flow.ts) pass it in;
 * the default is the process environment, for callers that have none at hand.
 */
import { localStateDir as stateDirOf } from "../local-state-dir.js";
import type { LocalEnvironment } from "../local-state-dir.js";

export { localRunPath } from "../local-state-dir.js";
export type { LocalEnvironment };

/** The process environment (only for callers that were not handed one). */
export const localProcessEnvironment = (): LocalEnvironment => process.env;

/** The local state directory (../local-state-dir.ts), of the process environment by default. */
export const localStateDir = (env: LocalEnvironment = localProcessEnvironment()): string => stateDirOf(env);
