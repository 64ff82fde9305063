/**
 * The user CLI without commander (issue 15: start-up): a user command (a CommandSpec in table.ts)
 * invoked plainly (spec.ts's fastParse) runs its action here, and commander is never loaded. Any
 * other invocation answers undefined and main.ts runs program.ts (commander), which parses it, prints
 * its help or its usage error, and runs the same action.
 */
import { printError } from "../print-error.js";
import type { CliDeps } from "./context.js";
import { GLOBAL_OPTIONS } from "./parsers.js";
import { topCommandOf } from "./route.js";
import { fastParse, isCommandSpec } from "./spec.js";
import { COMMANDS } from "./table.js";

/** Runs `argv` when it is a plain call of a CommandSpec's command and answers its exit status; undefined leaves it to commander. */
export const runFast = async (argv: readonly string[], deps: CliDeps): Promise<number | undefined> => {
  const top = topCommandOf(argv);
  const entry = COMMANDS.find((c) => c.name === top);
  if (!entry || entry.needsAll) return undefined;
  const definition = await entry.load();
  if (!isCommandSpec(definition)) return undefined;
  const parsed = fastParse(definition, GLOBAL_OPTIONS, argv.slice(2));
  if (!parsed) return undefined;
  let status = 0;
  try {
    await parsed.leaf.action?.({ ...deps, setExitCode: (code) => (status = code) }, parsed.call);
    return status;
  } catch (err) {
    return printError(deps.io, err);
  }
};
