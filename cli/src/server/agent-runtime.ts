import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, realpathSync, statSync } from "node:fs";
import { readFile, readdir, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join, relative } from "node:path";
import { copyReadableOnce } from "@flowsvc/store";

/** Where the local agents' code is: the agent's entry points and the in-script client's directory. */
export interface AgentPaths {
  agentMain: string;
  /** The agent package's entry (index.js): loading it loads every module the agent needs. */
  agentIndex: string;
  clientDir: string;
}

interface Pkg {
  name: string;
  /** The package's real directory. */
  dir: string;
  /** The package is one of our workspaces: only what it runs with is copied (not src/). */
  workspace: boolean;
}

/** What of a workspace package the agent runs with: its built code and the in-script clients. */
const WORKSPACE_PARTS = ["package.json", "dist", "bin", "bin-node", "libexec"];

/** Node's lookup of a bare package name: `node_modules/<name>` in `from` and each directory above it. */
const findPackageDir = (name: string, from: string): string | undefined => {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return realpathSync(candidate);
    if (dir === dirname(dir)) return undefined;
  }
};

/** The agent package and every package it needs at run time (dependencies, transitively). */
const agentPackages = (agentRoot: string): Pkg[] => {
  const found = new Map<string, Pkg>();
  const visit = (dir: string): void => {
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string; dependencies?: Record<string, string> };
    const seen = found.get(pkg.name);
    if (seen) {
      if (seen.dir !== dir)
        throw new Error(`the agent needs two copies of ${pkg.name} (${seen.dir} and ${dir}); its runtime copy holds one of each package`);
      return;
    }
    found.set(pkg.name, { name: pkg.name, dir, workspace: !dir.split("/").includes("node_modules") });
    for (const dep of Object.keys(pkg.dependencies ?? {})) {
      const depDir = findPackageDir(dep, dir);
      if (!depDir) throw new Error(`the agent's dependency ${dep} (of ${pkg.name}) is not installed; run npm install`);
      visit(depDir);
    }
  };
  visit(realpathSync(agentRoot));
  return [...found.values()];
};

/** The files a package contributes to the copy. */
const partsOf = (p: Pkg): string[] =>
  p.workspace ? WORKSPACE_PARTS.map((part) => join(p.dir, part)).filter((path) => existsSync(path)) : [p.dir];

/** A key of what would be copied: every file's path, size and modification time. */
const versionOf = (pkgs: readonly Pkg[]): string => {
  const h = createHash("sha256");
  const walk = (path: string): void => {
    const st = statSync(path);
    if (st.isDirectory()) {
      for (const name of readdirSync(path).sort()) walk(join(path, name));
      return;
    }
    h.update(`${path}\0${st.size}\0${st.mtimeMs}\n`);
  };
  for (const p of pkgs) partsOf(p).forEach(walk);
  return h.digest("hex").slice(0, 16);
};

/**
 * A copy of the agent's code, readable by every user, in `<data-dir>/agent-runtime/<version>`: for
 * a server run as root from a checkout its agent user cannot read (under /root, a `mktemp -d`).
 * Laid out as `node_modules/<package>`, so the agent resolves its imports inside the copy. The
 * Node shim of the in-script client names the agent's file by path: it is rewritten to the copy's.
 * The version is a digest of the files copied, so a rebuild makes a new copy and a restart reuses it.
 */
export const copyAgentRuntime = async (paths: AgentPaths, dataDir: string, log: (msg: string) => void): Promise<AgentPaths> => {
  const agentRoot = dirname(dirname(paths.agentIndex));
  const pkgs = agentPackages(agentRoot);
  const dest = join(dataDir, "agent-runtime", versionOf(pkgs));
  const home = (p: Pkg): string => join("node_modules", p.name);
  const agent = pkgs[0]!;
  const agentCopy = join(dest, home(agent));
  const entries = pkgs.flatMap((p) => partsOf(p).map((from) => ({ from, to: p.workspace ? join(home(p), basename(from)) : home(p) })));
  const fixup = async (scratch: string): Promise<void> => {
    for (const shim of ["bin/flow", "bin-node/flow"].map((f) => join(scratch, home(agent), f))) {
      if (!existsSync(shim)) continue;
      const text = await readFile(shim).then((b) => (b.subarray(0, 2).toString() === "#!" ? b.toString("utf8") : undefined));
      if (text?.includes(agent.dir)) await writeFile(shim, text.split(agent.dir).join(agentCopy));
    }
  };
  await copyReadableOnce(dest, entries, { log, fixup });
  // Copies of earlier builds: a new start loads only this one.
  for (const old of await readdir(dirname(dest))) {
    if (old !== basename(dest)) await rm(join(dirname(dest), old), { recursive: true, force: true });
  }
  const moved = (path: string): string => join(agentCopy, relative(realpathSync(agentRoot), realpathSync(path)));
  return { agentMain: moved(paths.agentMain), agentIndex: moved(paths.agentIndex), clientDir: moved(paths.clientDir) };
};
