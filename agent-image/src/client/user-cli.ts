/**
 * Hands a command that is not in-script (submit, follow, secret, emit outside a script, ...) to
 * the user CLI, as the native client does by exec'ing `node cli/dist/bin/flow.js`. Loaded in this
 * process: a second Node start-up would cost another ~100 ms.
 */
import { existsSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { say } from "./io.js";

/** This file is agent-image/dist/client/user-cli.js; the user CLI sits beside the agent. */
export const userCliPath = (): string => fileURLToPath(new URL("../../../cli/dist/bin/flow.js", import.meta.url));

/**
 * Imports the user CLI, which parses process.argv itself and owns the exit status from then on.
 * Returns an exit status only when the CLI is missing.
 */
export const runUserCli = async (cliPath = userCliPath()): Promise<number | undefined> => {
  if (!existsSync(cliPath)) {
    say(2, `error: the flow user CLI is not built (${cliPath} is missing)`, "run `npm run build` in the flowsvc repository");
    return 1;
  }
  process.argv[1] = cliPath; // as if node had been started on the CLI itself
  await import(pathToFileURL(cliPath).href);
  return undefined;
};
