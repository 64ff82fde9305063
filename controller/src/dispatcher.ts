import type { Pool } from "pg";
import {
  appendLogs,
  claimReadyJobs,
  giveUpJob,
  graceLeasesAfterRestart,
  mintToken,
  readyJobCapabilities,
  requeueExpiredJobs,
  requeueJobAttempt,
  returnUnstartedJob,
  withTransaction,
  type DispatchSlot,
  type DispatchSlots,
  type Listener,
} from "@flowsvc/store";
import type { LaunchFailureOptions, LaunchRequest, Launcher } from "./launcher.js";

/**
 * The controller's levelled logger (a pino logger fits): info for what happened, warn for what an
 * operator must act on, error for a pass that failed (these reach stderr).
 */
export interface ControllerLogger {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

export interface DispatcherOptions {
  pool: Pool;
  listener: Listener;
  /** One launcher per agent pool; each pool's agents advertise their own capabilities. */
  launchers: readonly Launcher[];
  leaseMs: number;
  /** A job dispatched more often than this without finishing fails its run. */
  maxAttempts: number;
  publicUrl: string | undefined;
  logger: ControllerLogger;
  /** Test seams, unset in production: the poll (1 s), the lease reaper (a quarter lease, 250 ms at least), the unserved check (10 s). */
  intervals?: { pollMs?: number; reapMs?: number; unservedCheckMs?: number };
}

const POLL_MS = 1000;
/** How often ready jobs are checked for capabilities no agent pool of this server advertises. */
const UNSERVED_CHECK_MS = 10_000;
/** Runs whose last launch failure was told to them, remembered (the oldest forgotten first). */
const TOLD_MAX = 1000;

/**
 * Moves ready jobs to agents: claims them with SKIP LOCKED as slots come free, and puts jobs whose
 * agent stopped renewing its lease back in the queue. NOTIFY on flowsvc_jobs and free slots wake
 * it; a one-second poll covers delayed jobs and missed nudges. A pool whose last claim found fewer
 * ready jobs than free slots, with no nudge since, is drained: nothing it could run waits, so a
 * slot it frees needs no claim, and its free slots may be reserved by an emit of this process for
 * the jobs it is inserting (`reserve`: the job is written dispatched in the emit's own statement
 * and launched once committed, without waiting for the queue).
 */
export class Dispatcher implements DispatchSlots {
  readonly #o: DispatcherOptions;
  #timer: NodeJS.Timeout | undefined;
  #reaper: NodeJS.Timeout | undefined;
  #unservedCheck: NodeJS.Timeout | undefined;
  /** Capability sets already warned about: once each, not every ten seconds. */
  readonly #warnedUnserved = new Set<string>();
  #off: Array<() => void> = [];
  readonly #pending = new Set<Promise<void>>();
  #busy = false;
  #again = false;
  #stopped = false;
  /** Nudges so far: a claim that a nudge overtook may have missed what the nudge announced. */
  #nudges = 0;
  /** Launchers whose last claim left nothing they could run in the queue, with no nudge since. */
  readonly #drained = new Set<Launcher>();
  /** Slots reserved by emits and not yet launched or released, per launcher. */
  readonly #held = new Map<Launcher, number>();
  /** Run id -> the launch failure last told to its log (told once, not at every retry). */
  readonly #told = new Map<string, string>();

  constructor(options: DispatcherOptions) {
    this.#o = options;
  }

  async start(): Promise<void> {
    const graced = await graceLeasesAfterRestart(this.#o.pool, this.#o.leaseMs);
    for (const launcher of this.#o.launchers) await launcher.adopt?.();
    if (graced > 0) this.#o.logger.info({ jobs: graced }, "jobs still leased from before the restart keep their agents for one more lease");
    this.#off.push(this.#o.listener.on("flowsvc_jobs", () => this.nudge()));
    this.#off.push(this.#o.listener.onReconnect(() => this.nudge()));
    const every = this.#o.intervals;
    this.#timer = setInterval(() => this.nudge(), every?.pollMs ?? POLL_MS);
    this.#reaper = setInterval(() => void this.#reap(), every?.reapMs ?? Math.max(250, Math.floor(this.#o.leaseMs / 4)));
    this.#unservedCheck = setInterval(() => void this.#warnUnserved(), every?.unservedCheckMs ?? UNSERVED_CHECK_MS);
    this.nudge();
  }

  /** Coalesces wake-ups: at most one claim pass runs, and one more follows if nudged meanwhile. */
  nudge(): void {
    this.#nudges++;
    this.#drained.clear();
    if (this.#stopped) return;
    if (this.#busy) {
      this.#again = true;
      return;
    }
    this.#busy = true;
    void this.#pass().finally(() => {
      this.#busy = false;
      if (this.#again) {
        this.#again = false;
        this.nudge();
      }
    });
  }

  /**
   * A launcher's slot came free: a claim pass, unless every pool is drained (nothing waits that a
   * pool could run; whatever is queued later comes with its NOTIFY, and a job made ready by time
   * with the poll).
   */
  slotFreed(): void {
    if (this.#o.launchers.every((l) => this.#drained.has(l))) return;
    this.nudge();
  }

  /**
   * A free slot of a drained pool whose agents have `capabilities`, held for a job an emit is about
   * to insert (store's DispatchSlots): the job is written dispatched with the slot's token digest and
   * lease, and `launch` after its commit gives it to an agent; `release` if it was not written so.
   * None while a pool may still have older ready jobs (they go first) or has no slot to spare.
   */
  reserve(capabilities: readonly string[]): DispatchSlot | undefined {
    if (this.#stopped) return undefined;
    const launcher = this.#o.launchers.find(
      (l) => this.#drained.has(l) && capabilities.every((c) => l.capabilities.includes(c)) && this.#freeOf(l) > 0,
    );
    return launcher ? this.#hold(launcher, capabilities) : undefined;
  }

  /** Free slots of a launcher that no reservation holds. */
  #freeOf(launcher: Launcher): number {
    return launcher.free() - (this.#held.get(launcher) ?? 0);
  }

  #hold(launcher: Launcher, capabilities: readonly string[]): DispatchSlot {
    const { token, digest } = mintToken("job");
    this.#held.set(launcher, (this.#held.get(launcher) ?? 0) + 1);
    let open = true;
    const close = (): boolean => {
      if (!open) return false;
      open = false;
      this.#held.set(launcher, (this.#held.get(launcher) ?? 1) - 1);
      return true;
    };
    return {
      digest,
      leaseMs: launcher.dispatchLeaseMs ?? this.#o.leaseMs,
      launch: ({ jobId, runId, org, project }) => {
        if (close()) this.#launch(launcher, { jobId, runId, attempt: 1, token, capabilities: [...capabilities], org, project });
      },
      // A pool that is not drained may have a job waiting for this slot.
      release: () => {
        if (close() && !this.#drained.has(launcher)) this.nudge();
      },
    };
  }

  /** The launcher saw an agent end: if its job was not finished, it goes back to the queue now. */
  agentExited(req: LaunchRequest, _code?: number | null, _signal?: string | null): void {
    const p = requeueJobAttempt(this.#o.pool, req.jobId, req.attempt).then(
      (requeued) => {
        if (requeued)
          this.#o.logger.info(
            { jobId: req.jobId, runId: req.runId, attempt: req.attempt },
            "agent ended without finishing its job; dispatching again",
          );
      },
      (err: unknown) => this.#o.logger.error({ err, jobId: req.jobId }, "could not requeue the job of an ended agent"),
    );
    this.#track(p);
  }

  /**
   * The launcher could not start an agent for this dispatch: the job goes back to the queue after
   * `retryAfterMs` without spending its attempt (a Pod that never scheduled is not an agent death).
   */
  launchFailed(req: LaunchRequest, reason: string, retryAfterMs: number, opts: LaunchFailureOptions = {}): void {
    const p = returnUnstartedJob(this.#o.pool, req.jobId, req.attempt, retryAfterMs).then(
      async (returned) => {
        if (!returned) return;
        this.#o.logger.warn(
          { jobId: req.jobId, runId: req.runId, attempt: req.attempt, reason, retryAfterMs },
          "agent did not start; job returned to the queue",
        );
        if (opts.tellRun) await this.#tellRun(req, reason, retryAfterMs);
      },
      (err: unknown) => this.#o.logger.error({ err, jobId: req.jobId }, "could not return the job of an agent that did not start"),
    );
    this.#track(p);
  }

  /** A launch failure the run's author should see, in its log as a system line: once per run and reason. */
  async #tellRun(req: LaunchRequest, reason: string, retryAfterMs: number): Promise<void> {
    if (this.#told.get(req.runId) === reason) return;
    this.#told.delete(req.runId);
    this.#told.set(req.runId, reason);
    if (this.#told.size > TOLD_MAX) this.#told.delete(this.#told.keys().next().value!);
    const data = `flowsvc: the agent did not start: ${reason}; the job is tried again every ${Math.round(retryAfterMs / 1000)} s\n`;
    try {
      await appendLogs(this.#o.pool, req.runId, req.jobId, [{ stream: "system", data }]);
    } catch (err) {
      this.#o.logger.error({ err, runId: req.runId }, "could not tell a run why its agent did not start");
    }
  }

  #track(p: Promise<void>): void {
    this.#pending.add(p);
    void p.finally(() => this.#pending.delete(p));
  }

  /** Waits for requeues of ended agents (at shutdown, after the launcher stopped its agents). */
  async drain(): Promise<void> {
    await Promise.all([...this.#pending]);
  }

  async #pass(): Promise<void> {
    try {
      for (const launcher of this.#o.launchers) await this.#fill(launcher);
    } catch (err) {
      this.#o.logger.error({ err }, "dispatch pass failed; retrying on the next tick");
    }
  }

  /** Hands ready jobs whose needs this pool meets to its free slots, until one side runs out. */
  async #fill(launcher: Launcher): Promise<void> {
    for (;;) {
      const free = this.#freeOf(launcher);
      if (free <= 0 || this.#stopped) return;
      const nudges = this.#nudges;
      const tokens = new Map<string, string>();
      const claimed = await claimReadyJobs(this.#o.pool, {
        limit: free,
        leaseMs: launcher.dispatchLeaseMs ?? this.#o.leaseMs,
        capabilities: launcher.capabilities,
        mintDigest: () => {
          const t = mintToken("job");
          tokens.set(t.digest.toString("hex"), t.token);
          return t.digest;
        },
      });
      // Stopped while the claim was out: what it took goes back to the queue, its attempt unspent, for another dispatcher.
      if (this.#stopped) {
        for (const job of claimed) await returnUnstartedJob(this.#o.pool, job.id, job.attempt, 0);
        return;
      }
      // Fewer ready than free slots: none is left (one queued meanwhile nudges another pass), so no
      // empty claim, and no tokens minted for it; and unless a nudge came meanwhile, the pool is drained.
      if (claimed.length < free && nudges === this.#nudges) this.#drained.add(launcher);
      for (const job of claimed) {
        if (job.attempt > this.#o.maxAttempts) {
          await this.#giveUp(job, job.attempt - 1);
          continue;
        }
        const token = tokens.get(job.digest.toString("hex"))!;
        const { org, project } = job;
        this.#launch(launcher, {
          jobId: job.id,
          runId: job.run_id,
          attempt: job.attempt,
          token,
          capabilities: job.capabilities,
          org,
          project,
        });
      }
      if (claimed.length < free) return;
    }
  }

  /** Starts the agent without waiting for it (a Pod takes API calls); a launch that throws gives the job back. */
  #launch(launcher: Launcher, req: LaunchRequest): void {
    this.#track(
      launcher.launch(req).catch((err: unknown) => {
        this.#o.logger.error({ err, jobId: req.jobId }, "launch failed");
        this.launchFailed(req, err instanceof Error ? err.message : String(err), 1000);
      }),
    );
  }

  /** A job whose agents kept dying: an activity child fails (its parent decides), a script run fails. */
  async #giveUp(job: { id: string; run_id: string; kind: string; activity_id: string | null }, attempts: number): Promise<void> {
    await withTransaction(this.#o.pool, (tx) => giveUpJob(tx, { job, attempts, publicUrl: this.#o.publicUrl }));
    this.#o.logger.warn({ jobId: job.id, runId: job.run_id, attempts }, "gave up on a job whose agents kept dying");
  }

  /**
   * A job that needs capabilities no pool advertises waits for ever, and silently unless told:
   * say which, and how to start agents that have them.
   */
  async #warnUnserved(): Promise<void> {
    try {
      for (const needs of await readyJobCapabilities(this.#o.pool)) {
        const key = [...needs].sort().join(",");
        if (this.#warnedUnserved.has(key)) continue;
        if (this.#o.launchers.some((l) => needs.every((c) => l.capabilities.includes(c)))) continue;
        this.#warnedUnserved.add(key);
        this.#o.logger.warn(
          { needs, pools: this.#o.launchers.map((l) => l.capabilities) },
          `jobs wait for an agent with capabilities ${key}, which no agent pool of this server advertises; start one with --agent-pool ${key}:<n>`,
        );
      }
    } catch (err) {
      this.#o.logger.error({ err }, "checking for jobs no agent pool can serve failed");
    }
  }

  async #reap(): Promise<void> {
    try {
      const runs = await requeueExpiredJobs(this.#o.pool);
      if (runs.length > 0) this.#o.logger.info({ runs }, "agent leases expired; dispatching those jobs again");
    } catch (err) {
      this.#o.logger.error({ err }, "lease reaper pass failed");
    }
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    if (this.#reaper) clearInterval(this.#reaper);
    if (this.#unservedCheck) clearInterval(this.#unservedCheck);
    this.#off.forEach((off) => off());
  }
}
