import { spawn, spawnSync } from "node:child_process";
import { chmod, chown, lstat, mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";

/** The unprivileged user local agents run as when the server runs as root. */
export interface AgentUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

/** Each dispatch's working directory is `<workRoot>/agt-...` (the agent id). */
const WORKDIR_PREFIX = "agt-";

/**
 * Removes directories under the agents' work root. As root, `rm` runs as the agent user: the tree
 * is the agent user's to change while we walk it, and a root walk could be steered by a symlink
 * swapped in mid-way into deleting a file of ours; as that user it can only delete what it could.
 */
export const removeAgentDirs = async (paths: readonly string[], user: AgentUser | undefined): Promise<void> => {
  if (paths.length === 0) return;
  if (!user) {
    await Promise.all(paths.map((p) => rm(p, { recursive: true, force: true, maxRetries: 3 })));
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const child = spawn("rm", ["-rf", "--", ...paths], { uid: user.uid, gid: user.gid, stdio: ["ignore", "ignore", "pipe"], cwd: "/" });
    let err = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`rm -rf as ${user.name} failed (exit ${code}): ${err.trim().slice(0, 500)}`))));
  });
};

/**
 * Ends a script's process group. As root the signal is sent by a child running as the agent
 * user: the pgid comes from a file the script could write, and the kernel then refuses any group
 * that is not the agent user's. Synchronous, so the group is gone before its job is requeued.
 */
export const killAgentGroup = (pgid: number, user: AgentUser | undefined): void => {
  if (!user) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // already gone
    }
    return;
  }
  spawnSync(process.execPath, ["-e", "try { process.kill(-Number(process.argv[1]), 'SIGKILL') } catch {}", String(pgid)], {
    uid: user.uid, gid: user.gid, stdio: "ignore", timeout: 10_000, cwd: "/", env: {},
  });
};

/**
 * Makes the agents' work root (0700; owned by the agent user when there is one) and removes the
 * working directories a killed server left behind (its agents die with it: they leave on the IPC
 * channel's disconnect). Call once at start, before any launcher runs; answers what it removed.
 * The work root's parent must be ours (not the agent user's): it is chowned without a walk.
 */
export const prepareAgentWorkRoot = async (workRoot: string, user: AgentUser | undefined): Promise<string[]> => {
  await mkdir(workRoot, { recursive: true, mode: 0o700 });
  const st = await lstat(workRoot);
  if (!st.isDirectory()) throw new Error(`the agents' work root ${workRoot} is not a directory`);
  if (user && (st.uid !== user.uid || st.gid !== user.gid)) await chown(workRoot, user.uid, user.gid);
  await chmod(workRoot, 0o700);
  const stale = (await readdir(workRoot)).filter((name) => name.startsWith(WORKDIR_PREFIX)).map((name) => join(workRoot, name));
  // Left by a server that ran its agents as itself (before it ran them as the agent user): ours to remove.
  const ours = user ? await Promise.all(stale.map(async (p) => (await lstat(p)).uid !== user.uid)) : [];
  await removeAgentDirs(stale.filter((_, i) => ours[i]), undefined);
  await removeAgentDirs(stale.filter((_, i) => !ours[i]), user);
  return stale;
};
