import type { LaunchRequest, Launcher, LauncherEvents } from "../launcher.js";

/**
 * A Launcher at the port, for dispatcher tests: it starts nothing. It records every launch, holds
 * a settable number of slots and capabilities, and reports what an adapter would: an agent that
 * finished its job and is free again, or one that ended without finishing (the dispatcher's
 * `agentExited`). A launch beyond its free slots is counted in `overbooked`, never refused, so a
 * test sees the dispatcher's mistake.
 */
export class FakeLauncher implements Launcher {
  readonly capabilities: readonly string[];
  /** Every launch, in order. */
  readonly launches: LaunchRequest[] = [];
  /** Launches made while free() was 0 or less. */
  overbooked = 0;
  stopped = false;
  #slots: number;
  readonly #running = new Map<string, LaunchRequest>();
  #events: LauncherEvents | undefined;

  constructor(opts: { slots: number; capabilities?: readonly string[] }) {
    this.#slots = opts.slots;
    this.capabilities = opts.capabilities ?? [];
  }

  /** Where the launcher reports agents that ended and slots that came free (a dispatcher's agentExited and nudge). */
  attach(events: LauncherEvents): void {
    this.#events = events;
  }

  free(): number {
    return this.#slots - this.#running.size;
  }

  /** Changes the pool's size; like a real pool, it does not nudge the dispatcher by itself. */
  setSlots(slots: number): void {
    this.#slots = slots;
  }

  launch(req: LaunchRequest): Promise<void> {
    if (this.free() <= 0) this.overbooked++;
    this.launches.push(req);
    this.#running.set(req.jobId, req);
    return Promise.resolve();
  }

  /** The agent of `jobId` never started: reported as a launch failure, and the slot frees. */
  failLaunch(jobId: string, reason = "never scheduled", retryAfterMs = 0): void {
    const req = this.#take(jobId);
    this.#events?.launchFailed(req, reason, retryAfterMs);
    this.#events?.slotFreed();
  }

  /** The launches of one job, in order (one per dispatch). */
  launchesOf(jobId: string): LaunchRequest[] {
    return this.launches.filter((l) => l.jobId === jobId);
  }

  /** The agent of `jobId` reported its job done and is free: the slot frees. */
  finish(jobId: string): void {
    this.#take(jobId);
    this.#events?.slotFreed();
  }

  /** The agent of `jobId` ended without finishing its job (it died): reported, and the slot frees. */
  exit(jobId: string, code: number | null = 1, signal: string | null = null): void {
    const req = this.#take(jobId);
    this.#events?.agentExited(req, code, signal);
    this.#events?.slotFreed();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.#running.clear();
    await Promise.resolve();
  }

  #take(jobId: string): LaunchRequest {
    const req = this.#running.get(jobId);
    if (!req) throw new Error(`fake launcher: no agent is running job ${jobId}`);
    this.#running.delete(jobId);
    return req;
  }
}
