import { spawn, spawnSync } from "node:child_process";
import { chmod, chown, lstat, mkdir, readdir, readlink, realpath, rm } from "node:fs/promises";
import { join } from "node:path";
import { WORKER_FIFO_STOCK_PREFIX } from "@flowsvc/core";

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
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`rm -rf as ${user.name} failed (exit ${code}): ${err.trim().slice(0, 500)}`)),
    );
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
    uid: user.uid,
    gid: user.gid,
    stdio: "ignore",
    timeout: 10_000,
    cwd: "/",
    env: {},
  });
};

/**
 * The working directories (names) under `workRoot` a live process works in: its cwd is inside.
 * An agent whose server died finishes its job before it exits (docs/internals.md), and its script
 * runs in the job's scratch directory there.
 */
const workdirsInUse = async (workRoot: string): Promise<Set<string>> => {
  const root = `${await realpath(workRoot)}/`;
  const used = new Set<string>();
  const pids = (await readdir("/proc")).filter((p) => /^\d+$/.test(p));
  await Promise.all(
    pids.map(async (pid) => {
      const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => "");
      if (cwd.startsWith(root))
        used.add(
          cwd
            .slice(root.length)
            .split("/")[0]!
            .replace(/ \(deleted\)$/, ""),
        );
    }),
  );
  return used;
};

/** Removes those of `names` (working directories under `workRoot`) no live process works in; answers the rest. */
export const sweepAgentWorkdirs = async (workRoot: string, names: readonly string[], user: AgentUser | undefined): Promise<string[]> => {
  if (names.length === 0) return [];
  const used = await workdirsInUse(workRoot);
  const free = names.filter((n) => !used.has(n));
  const entries = await Promise.all(
    free.map(async (n) => ({ path: join(workRoot, n), st: await lstat(join(workRoot, n)).catch(() => undefined) })),
  );
  const present = entries.filter((e) => e.st !== undefined);
  // Left by a server that ran its agents as itself (before it ran them as the agent user): ours to remove.
  await removeAgentDirs(
    present.filter((e) => user && e.st!.uid !== user.uid).map((e) => e.path),
    undefined,
  );
  await removeAgentDirs(
    present.filter((e) => !user || e.st!.uid === user.uid).map((e) => e.path),
    user,
  );
  return names.filter((n) => used.has(n));
};

/**
 * Makes the agents' work root (0700; owned by the agent user when there is one) and removes the
 * working directories a killed server left behind. Call once at start, before any launcher runs.
 * Answers what it removed, and what it left because a previous server's agent still works there
 * (sweep those again with sweepAgentWorkdirs until none is left). The work root's parent must be
 * ours, not the agent user's: the work root is chowned without a walk.
 */
export const prepareAgentWorkRoot = async (
  workRoot: string,
  user: AgentUser | undefined,
): Promise<{ removed: string[]; inUse: string[] }> => {
  await mkdir(workRoot, { recursive: true, mode: 0o700 });
  const st = await lstat(workRoot);
  if (!st.isDirectory()) throw new Error(`the agents' work root ${workRoot} is not a directory`);
  if (user && (st.uid !== user.uid || st.gid !== user.gid)) await chown(workRoot, user.uid, user.gid);
  await chmod(workRoot, 0o700);
  // Also the FIFO stocks of workers that died with their server (core's workerFifoStockName).
  const stale = (await readdir(workRoot)).filter((name) => name.startsWith(WORKDIR_PREFIX) || name.startsWith(WORKER_FIFO_STOCK_PREFIX));
  const inUse = await sweepAgentWorkdirs(workRoot, stale, user);
  return { removed: stale.filter((n) => !inUse.includes(n)), inUse };
};
