import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { newId } from "@flowsvc/core";
import type { LaunchRequest, Launcher, LauncherEvents } from "./launcher.js";

export interface LocalLauncherOptions {
  /** Most agents at once (`flow server --agents N`). */
  agents: number;
  capabilities: readonly string[];
  /** The agent entry point (agent-image/dist/main.js) and the in-script client directory. */
  agentMain: string;
  clientDir: string;
  /** Where each agent gets its working directory. */
  workRoot: string;
  serverUrl: string;
  /** The environment agents start with; service variables (FLOWSVC_*) are removed. */
  baseEnv: Record<string, string | undefined>;
  log: (obj: Record<string, unknown>, msg: string) => void;
  events: LauncherEvents;
}

/**
 * One agent process per job, at most `agents` at once. The agent is its own process group leader's
 * parent: it runs the script in a group of its own and writes that group's id to `script.pgid` in
 * its working directory, so when an agent dies the launcher can end its orphaned script too.
 */
export class LocalLauncher implements Launcher {
  readonly capabilities: readonly string[];
  readonly #opts: LocalLauncherOptions;
  readonly #running = new Map<string, { child: ChildProcess; req: LaunchRequest; workdir: string }>();
  #stopping = false;

  constructor(opts: LocalLauncherOptions) {
    this.#opts = opts;
    this.capabilities = opts.capabilities;
  }

  free(): number {
    return this.#stopping ? 0 : Math.max(0, this.#opts.agents - this.#running.size);
  }

  launch(req: LaunchRequest): void {
    const agentId = newId("agt", Date.now(), randomBytes(10));
    const workdir = join(this.#opts.workRoot, agentId);
    mkdirSync(workdir, { recursive: true, mode: 0o700 });
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.#opts.baseEnv)) if (v !== undefined && !k.startsWith("FLOWSVC_") && !k.startsWith("FLOW_")) env[k] = v;
    Object.assign(env, {
      FLOW_SERVER_URL: this.#opts.serverUrl,
      FLOW_JOB_TOKEN: req.token,
      FLOW_AGENT_ID: agentId,
      FLOW_AGENT_CAPABILITIES: this.#opts.capabilities.join(","),
      FLOW_AGENT_WORKDIR: workdir,
      FLOW_CLIENT_DIR: this.#opts.clientDir,
    });
    const child = spawn(process.execPath, [this.#opts.agentMain], { env, stdio: ["ignore", "ignore", "pipe"], cwd: workdir });
    this.#running.set(agentId, { child, req, workdir });
    this.#opts.log({ agentId, jobId: req.jobId, runId: req.runId, attempt: req.attempt, pid: child.pid }, "agent started");
    child.stderr?.setEncoding("utf8");
    let buf = "";
    child.stderr?.on("data", (d: string) => {
      buf += d;
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim()) this.#opts.log({ agentId, agent: line.slice(0, 4000) }, "agent says");
      }
    });
    child.on("error", (err) => this.#opts.log({ agentId, err }, "agent could not start"));
    child.on("exit", (code, signal) => {
      this.#running.delete(agentId);
      this.#reapScript(workdir);
      rmSync(workdir, { recursive: true, force: true });
      this.#opts.log({ agentId, jobId: req.jobId, code, signal }, "agent exited");
      this.#opts.events.agentExited(req, code, signal);
      this.#opts.events.slotFreed();
    });
  }

  /** Ends the process group of a script whose agent died (nothing happens when it already ended). */
  #reapScript(workdir: string): void {
    let pgid: number;
    try {
      pgid = Number(readFileSync(join(workdir, "script.pgid"), "utf8").trim());
    } catch {
      return;
    }
    if (!Number.isInteger(pgid) || pgid <= 1) return;
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // already gone
    }
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    const exits = [...this.#running.values()].map(
      ({ child }) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once("exit", () => resolve());
          child.kill("SIGTERM");
          setTimeout(() => child.kill("SIGKILL"), 5000).unref();
        }),
    );
    await Promise.all(exits);
  }
}
