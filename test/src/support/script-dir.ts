import { chmod, mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A temporary directory a test's scripts can read and write: as root the server runs its local
 * agents as flowsvc-agent, which a plain mkdtemp directory (0700, root's) keeps out.
 */
export const scriptDir = async (prefix: string, parent = tmpdir()): Promise<string> => {
  const dir = await mkdtemp(join(parent, prefix));
  await chmod(dir, 0o777);
  return dir;
};
