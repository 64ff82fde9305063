import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";

/**
 * Makes the data dir (0700 when new; local-agents.ts opens it to 0701 as root) and any missing
 * parent 0755: as root the agent user must pass through every parent to reach `agents/` and
 * `agent-home/`, so a parent made 0700 here would refuse the start it was made for ("<parent>
 * (mode 700) keeps them out"). Existing directories are left as they are.
 */
export const makeDataDir = async (dataDir: string): Promise<void> => {
  await mkdir(dirname(dataDir), { recursive: true, mode: 0o755 });
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
};
