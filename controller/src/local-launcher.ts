import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { WorkerReplySchema, newId, type WorkerJob } from "@flowsvc/core";
import type { LaunchRequest, Launcher, LauncherEvents } from "./launcher.js";
import { killAgentGroup, removeAgentDirs, type AgentUser } from "./agent-work-root.js";

export interface LocalLauncherOptions {
  /** Most jobs at once, and most agent processes kept (`flow server --agents N`). */
  agents: number;
  capabilities: readonly string[];
  /** The agent entry point (agent-image/dist/main.js) and the in-script client directory. */
  agentMain: string;
  clientDir: string;
  /**
   * Each job gets its working directory here; the agent makes it, so the agent user must be able
   * to write here (prepareAgentWorkRoot, called once before the launchers start, sees to it).
   */
  workRoot: string;
  /**
   * The unprivileged user the agents (and so the scripts) run as; the server must be root. Unset:
   * they run as the server's user. `baseEnv` should then carry that user's HOME, USER and LOGNAME.
   */
  runAs?: AgentUser;
  serverUrl: string;
  /** The environment agents start with; service variables (FLOWSVC_*, FLOW_*) are removed. */
  baseEnv: Record<string, string | undefined>;
  log: (obj: Record<string, unknown>, msg: string) => void;
  events: LauncherEvents;
  /** Jobs one agent process runs before it is replaced (default 1000). */
  maxJobsPerAgent?: number;
  /** How long an idle agent stays when another one is idle too (default 60 s). */
  idleMs?: number;
  /**
   * The least level of the agents' own lines, which are forwarded into the server's log (default
   * warn: their info lines repeat what the server logs of each job: assigned, claimed, finished).
   */
  agentLogLevel?: "debug" | "info" | "warn" | "error";
  /** false: the agents start scripts with Node's spawn, not the native spawner (FLOW_AGENT_SPAWNER=off). */
  scriptSpawner?: boolean;
}

/**
 * A worker keeps nothing between jobs (agent-image/src/worker.ts); replacing it bounds what a slow
 * leak could grow to. A start costs ~400 ms of CPU (Node, undici, zod, core): over 200 jobs that
 * was ~2 ms of every job's ~25 ms, over 1000 it is 0.4 ms. Its RSS levels off near 115 MB (85 MB
 * after its first 50 jobs, 115 MB after 300, +2 MB over the last 50 measured).
 */
const DEFAULT_MAX_JOBS = 1000;
const DEFAULT_IDLE_MS = 60_000;
/** SIGTERM to SIGKILL for an agent (above the agent's own grace for its script, 3 s). */
const KILL_GRACE_MS = 5_000;

/** A local agent process as `flow agents ls` shows it. */
export interface LocalAgentInfo {
  /** `local-<pid>`. */
  id: string;
  pid: number;
  capabilities: readonly string[];
  /** starting: spawned, not yet ready for a job. */
  status: "idle" | "busy" | "starting";
  jobId?: string;
  runId?: string;
  /** The dispatch's agent id (FLOW_AGENT_ID, the claim's agent_id). */
  agentId?: string;
  /** Jobs it was given so far (it is replaced after maxJobsPerAgent). */
  jobsRun: number;
  startedAt: Date;
}

/** One dispatch: the job, the agent id it runs under (FLOW_AGENT_ID) and its working directory. */
interface Assignment {
  readonly req: LaunchRequest;
  readonly agentId: string;
  readonly workdir: string;
  /** The process group of the job's script (or command), once the agent said it (`group`). */
  pgid?: number;
}

interface AgentProcess {
  readonly child: ChildProcess;
  readonly started: number;
  job: Assignment | undefined;
  /** Jobs given to it so far. */
  jobs: number;
  /** Told to exit: takes no more jobs. */
  retiring: boolean;
  /** It said `ready`: started and listening for jobs. */
  ready: boolean;
  idleSince: number;
  idleTimer: NodeJS.Timeout | undefined;
  exited: boolean;
}

/**
 * Local agents: reusable agent processes in worker mode (FLOW_AGENT_MODE=worker,
 * agent-image/src/worker.ts), at most `agents` jobs at once. A job goes to an idle agent over IPC
 * (`{type: "job", jobId, runId, attempt, token, agentId, workdir}`), or to a new one when none is
 * idle; the agent answers `{type: "done"}` and takes the next. Starting Node and the agent costs
 * about 450 ms on a small machine, which used to be paid by every job and every replay pass.
 *
 * - Each dispatch gets its own agent id (`agt-...`, FLOW_AGENT_ID, the claim's agent_id) and its
 *   own working directory `<workRoot>/<agentId>` (0700), removed after the job.
 * - One agent per pool is started with the launcher; when a job takes the last idle agent and the
 *   pool has room, another is started so the next job finds one ready.
 * - An agent is replaced (at once, by a fresh one) after `maxJobsPerAgent` jobs; an idle one exits
 *   after `idleMs` when another agent of the pool is idle too, so a quiet laptop keeps one Node
 *   process per pool.
 * - An agent runs the script in a process group of its own and tells the group's id over IPC
 *   (`{type: "group"}`): when an agent dies mid-job, the launcher ends the orphaned script and
 *   reports `agentExited` (the job is requeued at once).
 * - As root (`runAs`), agents run as an unprivileged user, and what the launcher does inside the
 *   work root (removing a working directory, ending a script's group) it does as that user too.
 * Reuse does not weaken local isolation: the agents of one server share one user either way (README).
 */
export class LocalLauncher implements Launcher {
  readonly capabilities: readonly string[];
  readonly #opts: LocalLauncherOptions;
  readonly #maxJobs: number;
  readonly #idleMs: number;
  readonly #pool = new Set<AgentProcess>();
  /** Working directories being removed: stop() waits for them, so a clean stop leaves none. */
  readonly #removals = new Set<Promise<void>>();
  #stopping = false;

  /** Starts the pool's first agent at once, so the first job does not wait for Node to start. */
  constructor(opts: LocalLauncherOptions) {
    this.#opts = opts;
    this.capabilities = opts.capabilities;
    this.#maxJobs = opts.maxJobsPerAgent ?? DEFAULT_MAX_JOBS;
    this.#idleMs = opts.idleMs ?? DEFAULT_IDLE_MS;
    if (opts.agents > 0) this.#spawn();
  }

  free(): number {
    if (this.#stopping) return 0;
    return Math.max(0, this.#opts.agents - this.usage().busy);
  }

  /** The pool's live agent processes, for `flow agents ls` (ingest's AgentRoster). */
  agents(): LocalAgentInfo[] {
    const out: LocalAgentInfo[] = [];
    for (const a of this.#pool) {
      if (a.exited || a.child.pid === undefined) continue;
      const job = a.job;
      out.push({
        id: `local-${a.child.pid}`,
        pid: a.child.pid,
        capabilities: this.capabilities,
        status: job ? "busy" : a.ready ? "idle" : "starting",
        ...(job ? { jobId: job.req.jobId, runId: job.req.runId, agentId: job.agentId } : {}),
        jobsRun: a.jobs,
        startedAt: new Date(a.started),
      });
    }
    return out;
  }

  /** Agents running a job now, and the most jobs the pool runs at once (its metrics, store's ServiceMetrics). */
  usage(): { busy: number; size: number } {
    let busy = 0;
    for (const a of this.#pool) if (a.job) busy++;
    return { busy, size: this.#opts.agents };
  }

  /** Settles at once: the job goes to an idle agent (or a new one) over IPC; an agent that dies reports agentExited. */
  launch(req: LaunchRequest): Promise<void> {
    const agentId = newId("agt", Date.now(), randomBytes(10));
    // The agent makes it (0700) when it prepares the job's scratch directory: a synchronous mkdir
    // here held up the server's event loop on every dispatch.
    const workdir = join(this.#opts.workRoot, agentId);
    const agent = this.#idleAgent() ?? this.#spawn();
    this.#assign(agent, { req, agentId, workdir });
    if (!this.#idleAgent()) this.#spawnIfRoom();
    return Promise.resolve();
  }

  /** Starts an agent if the pool (not counting agents on their way out) has room for it. */
  #spawnIfRoom(): void {
    if (this.#stopping) return;
    let staying = 0;
    for (const a of this.#pool) if (!a.retiring && !a.exited) staying++;
    if (staying < this.#opts.agents) this.#spawn();
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.all([...this.#pool].map((a) => this.#terminate(a)));
    await Promise.all(this.#removals);
  }

  /**
   * The idle agent that finished last (the others age out), preferring one that said it is ready:
   * one still starting makes the job wait for Node.
   */
  #idleAgent(): AgentProcess | undefined {
    let best: AgentProcess | undefined;
    for (const a of this.#pool) {
      if (a.job || a.retiring || a.exited) continue;
      if (!best || (a.ready && !best.ready) || (a.ready === best.ready && a.idleSince > best.idleSince)) best = a;
    }
    return best;
  }

  #spawn(): AgentProcess {
    mkdirSync(this.#opts.workRoot, { recursive: true, mode: 0o700 });
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.#opts.baseEnv))
      if (v !== undefined && !k.startsWith("FLOWSVC_") && !k.startsWith("FLOW_")) env[k] = v;
    Object.assign(env, {
      FLOW_AGENT_MODE: "worker",
      FLOW_SERVER_URL: this.#opts.serverUrl,
      FLOW_AGENT_CAPABILITIES: this.#opts.capabilities.join(","),
      FLOW_CLIENT_DIR: this.#opts.clientDir,
      FLOW_AGENT_LOG_LEVEL: this.#opts.agentLogLevel ?? "warn",
      ...(this.#opts.scriptSpawner === false ? { FLOW_AGENT_SPAWNER: "off" } : {}),
    });
    const user = this.#opts.runAs;
    const child = spawn(process.execPath, [this.#opts.agentMain], {
      env,
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      cwd: this.#opts.workRoot,
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
    const agent: AgentProcess = {
      child,
      started: Date.now(),
      job: undefined,
      jobs: 0,
      retiring: false,
      ready: false,
      idleSince: Date.now(),
      idleTimer: undefined,
      exited: false,
    };
    this.#pool.add(agent);
    this.#opts.log({ pid: child.pid, capabilities: this.#opts.capabilities }, "agent started");
    this.#forwardStderr(agent);
    child.on("message", (m: unknown) => this.#onMessage(agent, m));
    child.on("error", (err) => {
      this.#opts.log({ pid: child.pid, err }, "agent process error");
      if (child.pid === undefined) this.#onExit(agent, null, null); // it never started: no exit follows
    });
    child.on("exit", (code, signal) => this.#onExit(agent, code, signal));
    this.#armIdle(agent);
    return agent;
  }

  #forwardStderr(agent: AgentProcess): void {
    const { child } = agent;
    child.stderr?.setEncoding("utf8");
    let buf = "";
    child.stderr?.on("data", (d: string) => {
      buf += d;
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim()) this.#opts.log({ pid: child.pid, agentId: agent.job?.agentId, agent: line.slice(0, 4000) }, "agent says");
      }
    });
  }

  #assign(agent: AgentProcess, job: Assignment): void {
    clearTimeout(agent.idleTimer);
    agent.job = job;
    agent.jobs += 1;
    const { req, agentId, workdir } = job;
    // Before the agent listens, Node queues the message; if the agent died meanwhile, its exit requeues the job.
    const message: WorkerJob = {
      type: "job",
      jobId: req.jobId,
      runId: req.runId,
      attempt: req.attempt,
      token: req.token,
      agentId,
      workdir,
    };
    agent.child.send(message, (err) => {
      if (err) this.#opts.log({ agentId, jobId: req.jobId, pid: agent.child.pid, err }, "could not give the job to the agent");
    });
    // Logged once sent: the line's write (a pipe's reader woken, on a busy host ~0.3 ms) is not on the job's way to its agent.
    this.#opts.log(
      { agentId, jobId: req.jobId, runId: req.runId, attempt: req.attempt, pid: agent.child.pid, jobs: agent.jobs },
      "job assigned",
    );
  }

  #onMessage(agent: AgentProcess, raw: unknown): void {
    const parsed = WorkerReplySchema.safeParse(raw);
    const m = parsed.success ? parsed.data : undefined;
    if (m?.type === "ready") {
      agent.ready = true;
      this.#opts.log({ pid: agent.child.pid, startMs: Date.now() - agent.started }, "agent ready");
      return;
    }
    const job = agent.job;
    if (!m || !job || m.jobId !== job.req.jobId) {
      this.#opts.log({ pid: agent.child.pid, agentId: job?.agentId }, "unexpected message from an agent; killing it");
      agent.child.kill("SIGKILL"); // its exit requeues the job it held
      return;
    }
    if (m.type === "group") {
      job.pgid = m.pgid;
      return;
    }
    // The job finished, parked, was lost or never claimed: each leaves nothing to requeue (the
    // `stopped` ending sends no `done`; the agent exits and the exit requeues).
    agent.job = undefined;
    this.#opts.log(
      { agentId: job.agentId, jobId: job.req.jobId, runId: job.req.runId, pid: agent.child.pid, outcome: m.outcome },
      "job done",
    );
    this.#removeWorkdir(job.workdir);
    if (agent.jobs >= this.#maxJobs) {
      void this.#terminate(agent, "it ran its share of jobs");
      // Replaced now, one for one: retiring recycles a process and leaves the pool its size (only
      // idleness shrinks it), so a burst does not find fewer agents ready than before.
      this.#spawnIfRoom();
    } else {
      agent.idleSince = Date.now();
      this.#armIdle(agent);
    }
    this.#opts.events.slotFreed();
  }

  #onExit(agent: AgentProcess, code: number | null, signal: string | null): void {
    if (agent.exited) return;
    agent.exited = true;
    this.#pool.delete(agent);
    clearTimeout(agent.idleTimer);
    const job = agent.job;
    agent.job = undefined;
    const { pid } = agent.child;
    if (!job) {
      this.#opts.log({ pid, code, signal, jobs: agent.jobs }, "agent exited");
      return;
    }
    if (job.pgid !== undefined) killAgentGroup(job.pgid, this.#opts.runAs); // the orphaned script, if it still runs
    this.#removeWorkdir(job.workdir);
    this.#opts.log(
      { agentId: job.agentId, jobId: job.req.jobId, runId: job.req.runId, pid, code, signal, jobs: agent.jobs },
      "agent exited",
    );
    this.#opts.events.agentExited(job.req, code, signal);
    this.#opts.events.slotFreed();
  }

  /** An idle agent leaves after idleMs if another idle one stays. */
  #armIdle(agent: AgentProcess): void {
    clearTimeout(agent.idleTimer);
    agent.idleTimer = setTimeout(() => {
      agent.idleTimer = undefined;
      if (agent.job || agent.retiring || this.#stopping) return;
      const others = [...this.#pool].some((a) => a !== agent && !a.job && !a.retiring && !a.exited);
      if (others) void this.#terminate(agent, "idle");
      else this.#opts.log({ pid: agent.child.pid }, "agent stays"); // the last idle one: tests wait on this line
    }, this.#idleMs);
    agent.idleTimer.unref();
  }

  /** SIGTERM (the agent ends its job's script and exits), SIGKILL after the grace; resolves on exit. */
  #terminate(agent: AgentProcess, reason?: string): Promise<void> {
    agent.retiring = true;
    clearTimeout(agent.idleTimer);
    if (reason) this.#opts.log({ pid: agent.child.pid, jobs: agent.jobs, reason }, "agent retiring");
    const { child } = agent;
    return new Promise<void>((resolve) => {
      if (agent.exited || child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), KILL_GRACE_MS).unref();
    });
  }

  #removeWorkdir(workdir: string): void {
    const removal = removeAgentDirs([workdir], this.#opts.runAs)
      .catch((err: unknown) => this.#opts.log({ workdir, err }, "could not remove a job's working directory"))
      .finally(() => this.#removals.delete(removal));
    this.#removals.add(removal);
  }
}
