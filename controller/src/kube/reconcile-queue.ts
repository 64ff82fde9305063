// A per-key work queue for reconcilers (after pepr's queue and controller-runtime's workqueue): a
// key enqueued while it waits is not queued twice; a key is never reconciled by two workers at
// once (a change that arrives meanwhile runs it again afterwards); a failed pass is retried with a
// capped backoff. Reconcilers are level-based: they read the current object, so a key is all a
// change needs to carry.
import type { KubeLog } from "./reconcile-log.js";

export interface QueueOptions {
  name: string;
  concurrency?: number;
  /** First retry delay; doubled per failure up to maxRetryMs. */
  retryMs?: number;
  maxRetryMs?: number;
}

export class ReconcileQueue {
  readonly #waiting = new Set<string>();
  readonly #running = new Set<string>();
  readonly #dirty = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #order: string[] = [];
  readonly #opts: Required<QueueOptions>;
  #active = 0;
  #stopped = false;
  #idle: Array<() => void> = [];

  constructor(
    private readonly work: (key: string) => Promise<void>,
    private readonly log: KubeLog,
    opts: QueueOptions,
  ) {
    this.#opts = { concurrency: 4, retryMs: 200, maxRetryMs: 10_000, ...opts };
  }

  add(key: string): void {
    if (this.#stopped) return;
    if (this.#running.has(key)) {
      this.#dirty.add(key);
      return;
    }
    if (this.#waiting.has(key)) return;
    this.#waiting.add(key);
    this.#order.push(key);
    this.#pump();
  }

  /** Resolves when nothing waits or runs (tests and benchmarks; retries still pending count as idle). */
  idle(): Promise<void> {
    if (this.#active === 0 && this.#order.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  stop(): void {
    this.#stopped = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }

  #pump(): void {
    while (this.#active < this.#opts.concurrency && this.#order.length > 0) {
      const key = this.#order.shift()!;
      this.#waiting.delete(key);
      this.#running.add(key);
      this.#active++;
      void this.#run(key);
    }
    if (this.#active === 0 && this.#order.length === 0) for (const fn of this.#idle.splice(0)) fn();
  }

  async #run(key: string): Promise<void> {
    try {
      await this.work(key);
      this.#failures.delete(key);
    } catch (err) {
      this.#retryLater(key, err);
    } finally {
      this.#running.delete(key);
      this.#active--;
      if (this.#dirty.delete(key)) this.add(key);
      this.#pump();
    }
  }

  #retryLater(key: string, err: unknown): void {
    const n = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, n);
    const delay = Math.min(this.#opts.maxRetryMs, this.#opts.retryMs * 2 ** (n - 1));
    this.log.warn({ err, queue: this.#opts.name, key, attempt: n, retryInMs: delay }, "reconcile failed; retrying");
    const t = setTimeout(() => {
      this.#timers.delete(t);
      this.add(key);
    }, delay);
    t.unref();
    this.#timers.add(t);
  }
}
