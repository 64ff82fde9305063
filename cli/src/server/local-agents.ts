import { spawnSync } from "node:child_process";
import { chmod, chown, lstat, mkdir, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { FlowError } from "@flowsvc/core";
import { EMBEDDED_POSTGRES_USER, blockedDirFor, ensureSystemUser, lookupUser } from "@flowsvc/store";
import { prepareAgentWorkRoot, type AgentUser } from "@flowsvc/controller";
import { copyAgentRuntime, type AgentPaths } from "./agent-runtime.js";

export interface LocalAgentsSetup {
  /** The user the agents run as; undefined when the server is not root (they run as the server's user). */
  runAs: AgentUser | undefined;
  /** The environment the agents start with. */
  env: Record<string, string | undefined>;
  /** Working directories of a previous server's agents (left by a kill -9): removed, and still in use. */
  stale: { removed: string[]; inUse: string[] };
  /** Where the agents' code is: the checkout, or a copy the agent user can read. */
  paths: AgentPaths;
}

export interface LocalAgentsInput {
  dataDir: string;
  workRoot: string;
  /** FLOWSVC_AGENT_USER: who the agents run as when the server is root. */
  userName: string;
  paths: AgentPaths;
  baseEnv: Record<string, string | undefined>;
  log: (msg: string) => void;
}

/** Variables of the server's user that name its own directories; an agent user has none of these. */
const USER_DIR_VARS = ["XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "MAIL"];

/**
 * Readies the local agents' user and directories. Not root: nothing changes (the agents run as the
 * server's user), except that a killed server's leftover working directories are removed. Root:
 * the agents run as `userName` (created as a system user when missing, never root and never the
 * embedded Postgres user, which owns the cluster); the data dir becomes 0701 (others may pass
 * through, to their own directories, but not list it; what is in it stays 0600 root); the agents
 * get `<data-dir>/agents` and `<data-dir>/agent-home` (HOME), both theirs and 0700; and the agent
 * code, the `flow` client and Node itself must be readable by that user, or this says which
 * directory keeps it out.
 */
export const prepareLocalAgents = async (input: LocalAgentsInput): Promise<LocalAgentsSetup> => {
  if (process.getuid?.() !== 0) {
    return { runAs: undefined, env: input.baseEnv, stale: await prepareAgentWorkRoot(input.workRoot, undefined), paths: input.paths };
  }
  const user = agentUser(input.userName);
  await openDataDir(input.dataDir, user);
  const home = join(input.dataDir, "agent-home");
  await mkdir(home, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== "EEXIST") throw err;
  });
  if (!(await lstat(home)).isDirectory()) throw new FlowError("config", `${home} (the local agents' HOME) is not a directory`);
  await chown(home, user.uid, user.gid);
  await chmod(home, 0o700);
  const stale = await prepareAgentWorkRoot(input.workRoot, user);
  const paths = await readableAgentCode(input, user);
  const env: Record<string, string | undefined> = { ...input.baseEnv, HOME: home, USER: user.name, LOGNAME: user.name };
  for (const name of USER_DIR_VARS) delete env[name];
  return { runAs: user, env, stale, paths };
};

const agentUser = (name: string): AgentUser => {
  // root and the Postgres user are refused for what they are: creating them again is no remedy.
  const toCreate = name === "root" || name === EMBEDDED_POSTGRES_USER ? "flowsvc-agent" : name;
  const hint = `create an unprivileged user for them (useradd --system ${toCreate}), set FLOWSVC_AGENT_USER to one, or run flowsvc as a normal user`;
  if (name === EMBEDDED_POSTGRES_USER) {
    throw new FlowError(
      "config",
      `FLOWSVC_AGENT_USER=${name}: embedded Postgres runs as "${name}" and owns its cluster, so scripts running as "${name}" could read every project's data`,
      { hint },
    );
  }
  let user;
  try {
    user = lookupUser(name) ?? ensureSystemUser(name, "local agents");
  } catch (err) {
    throw new FlowError("config", (err as Error).message, { hint });
  }
  if (user.uid === 0 || user.gid === 0) {
    throw new FlowError(
      "config",
      `FLOWSVC_AGENT_USER=${name} is root (uid ${user.uid}, gid ${user.gid}); local agents run as an unprivileged user`,
      { hint },
    );
  }
  const pg = lookupUser(EMBEDDED_POSTGRES_USER);
  if (pg && pg.uid === user.uid) {
    throw new FlowError(
      "config",
      `FLOWSVC_AGENT_USER=${name} has the uid of "${EMBEDDED_POSTGRES_USER}" (${user.uid}), which owns embedded Postgres's cluster`,
      { hint },
    );
  }
  return user;
};

/** The agent user must reach its directories in the data dir, and nothing else there. */
const openDataDir = async (dataDir: string, user: AgentUser): Promise<void> => {
  const blocked = blockedDirFor(dirname(dataDir), user);
  if (blocked !== undefined) {
    throw new FlowError(
      "config",
      `local agents run as "${user.name}" when flowsvc runs as root, and ${blocked} (mode ${((await stat(blocked)).mode & 0o777).toString(8)}) keeps them out of ${dataDir}`,
      {
        hint: "choose a data dir under a path other users can traverse (e.g. /var/lib/flowsvc), or run as a normal user",
      },
    );
  }
  await chmod(dataDir, 0o701);
};

/**
 * The agent code and the `flow` client where the agent user can load them: the checkout when it
 * can, else a readable copy in the data dir (agent-runtime.ts), as embedded Postgres copies its
 * binaries. Node itself is not copied: the start names the directory that keeps the user out.
 */
const readableAgentCode = async (input: LocalAgentsInput, user: AgentUser): Promise<AgentPaths> => {
  const blockedNode = blockedDirFor(dirname(process.execPath), user);
  if (blockedNode !== undefined) {
    throw new FlowError(
      "config",
      `local agents run as "${user.name}" when flowsvc runs as root, and ${blockedNode} keeps them out of Node (${process.execPath})`,
      {
        hint: "install Node where other users can run it (e.g. /usr/local), or run as a normal user",
      },
    );
  }
  const reachable = [input.paths.agentMain, join(input.paths.clientDir, "flow")].every(
    (p) => blockedDirFor(dirname(p), user) === undefined,
  );
  if (reachable && loadProblem(input.paths, input.baseEnv, user) === undefined) return input.paths;
  const copied = await copyAgentRuntime(input.paths, input.dataDir, input.log);
  const problem = loadProblem(copied, input.baseEnv, user);
  if (problem !== undefined) {
    throw new FlowError(
      "config",
      `local agents run as "${user.name}" when flowsvc runs as root, and that user cannot load the agent's copy (${copied.agentMain}): ${problem}`,
      {
        hint: "run as a normal user, or report this as a bug",
      },
    );
  }
  return copied;
};

/** Loads the agent's modules and checks the client as the agent user: what went wrong, or undefined. */
const loadProblem = (paths: AgentPaths, baseEnv: Record<string, string | undefined>, user: AgentUser): string | undefined => {
  const probe = `await import(${JSON.stringify(pathToFileURL(paths.agentIndex).href)}); await import("node:fs").then((fs) => fs.accessSync(${JSON.stringify(join(paths.clientDir, "flow"))}, fs.constants.X_OK));`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", probe], {
    uid: user.uid,
    gid: user.gid,
    cwd: "/",
    env: { PATH: baseEnv["PATH"] ?? "/usr/bin:/bin" },
    encoding: "utf8",
    timeout: 60_000,
  });
  if (r.status === 0) return undefined;
  return (
    r.error?.message ??
    r.stderr
      .trim()
      .split("\n")
      .find((l) => /Error|EACCES|denied/.test(l)) ??
    r.stderr.trim().slice(0, 500)
  );
};
