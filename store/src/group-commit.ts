// Group commit: many concurrent writes share one transaction, so they share one WAL flush.
//
// Each submitted item is applied inside a batch transaction (by `applyBatch(tx, items)`, or item by
// item with `eachItem(apply)`), and its promise
// settles only after that transaction committed (or definitely failed). Batching is "natural": an
// item that arrives while no batch is committing starts a batch at once (one sender pays no added
// latency); one that arrives while a batch commits waits for the end of the event loop's turn, so
// the items read together from the sockets go together (no timer); items that arrive while every
// slot is busy queue up and go together in the next batch, up to `maxBatch`. `lingerMs` (default 0) can hold an idle batch back
// to gather company: at one sender that is pure added latency, and under load batches form on
// their own while a commit is in flight, so it stays off. Two batches in flight let one commit
// (its WAL flush) while the next one runs its statements.
//
// When the committer has `alone`, each batch first tries it: the batch written and committed by one
// autocommit statement (one round trip instead of BEGIN, statements and COMMIT); it declines,
// having written nothing, when the batch needs a transaction, and the batch is applied as above.
//
// A batch whose transaction fails (one item's error aborts the whole transaction) is retried item
// by item, each in a transaction of its own, so one bad item neither loses nor wrongly acknowledges
// the others: each settles with its own outcome. The retries run one after another inside the
// batch's slot, so a failure storm never takes more than `maxInFlight` connections.
import type { Pool, PoolClient } from "pg";
import { withTransaction } from "./pool.js";

export interface GroupCommitOptions<I = unknown, O = unknown> {
  /** Most items in one transaction. Default 64. */
  maxBatch?: number;
  /** Batch transactions committing at once. Default 2. */
  maxInFlight?: number;
  /** How long an idle committer waits for more items before it starts a batch. Default 0. */
  lingerMs?: number;
  /** SQL for BEGIN's round trip of each batch's transaction (withTransaction's `begin`). */
  begin?: (items: readonly I[]) => string;
  /**
   * A batch written and committed without a transaction block (one autocommit statement: one
   * round trip in all), tried first; it answers undefined, having written nothing, when the batch
   * needs the transactional way, and then `apply` runs in a transaction as usual.
   */
  alone?: (db: PoolClient, items: readonly I[]) => Promise<O[] | undefined>;
}

interface Pending<I, O> {
  item: I;
  resolve(value: O): void;
  reject(err: unknown): void;
}

export interface GroupCommitStats {
  batches: number;
  items: number;
  /** Batches committed by `alone`, in one round trip. */
  alone: number;
  /** Batches whose transaction failed and whose items were retried alone. */
  splitBatches: number;
}

/** Applies a whole batch in the caller's transaction; answers one result per item, in order. */
export type ApplyBatch<I, O> = (tx: PoolClient, items: readonly I[]) => Promise<O[]>;

/** A batch applier that applies each item in turn with `apply` (the simple case). */
export const eachItem =
  <I, O>(apply: (tx: PoolClient, item: I) => Promise<O>): ApplyBatch<I, O> =>
  async (tx, items) => {
    const out: O[] = [];
    for (const item of items) out.push(await apply(tx, item));
    return out;
  };

export class GroupCommitter<I, O> {
  readonly #pool: Pool;
  readonly #apply: ApplyBatch<I, O>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #lingerMs: number;
  readonly #begin: ((items: readonly I[]) => string) | undefined;
  readonly #alone: GroupCommitOptions<I, O>["alone"];
  #queue: Array<Pending<I, O>> = [];
  #inFlight = 0;
  #linger: NodeJS.Timeout | undefined;
  #gathering = false;
  #closed = false;
  #drained: Array<() => void> = [];
  readonly stats: GroupCommitStats = { batches: 0, items: 0, alone: 0, splitBatches: 0 };

  constructor(pool: Pool, apply: ApplyBatch<I, O>, opts: GroupCommitOptions<I, O> = {}) {
    this.#pool = pool;
    this.#apply = apply;
    this.#maxBatch = Math.max(1, opts.maxBatch ?? 64);
    this.#maxInFlight = Math.max(1, opts.maxInFlight ?? 2);
    this.#lingerMs = Math.max(0, opts.lingerMs ?? 0);
    this.#begin = opts.begin;
    this.#alone = opts.alone;
  }

  /** Applies `item` in the next batch; resolves with its result once that batch committed. */
  submit(item: I): Promise<O> {
    if (this.#closed) return Promise.reject(new Error("group commit: closed"));
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      this.#pump();
    });
  }

  /** Refuses new items and resolves once every queued and committing batch has settled. */
  close(): Promise<void> {
    this.#closed = true;
    if (this.#linger) {
      clearTimeout(this.#linger);
      this.#linger = undefined;
      this.#pump(true);
    }
    if (this.#queue.length === 0 && this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drained.push(resolve));
  }

  #pump(lingered = false): void {
    while (this.#queue.length > 0 && this.#inFlight < this.#maxInFlight) {
      if (!lingered && this.#holdBack()) return;
      const batch = this.#queue.splice(0, this.#maxBatch);
      this.#inFlight++;
      void this.#commit(batch).finally(() => {
        this.#inFlight--;
        this.#pump();
        if (this.#queue.length === 0 && this.#inFlight === 0) for (const done of this.#drained.splice(0)) done();
      });
    }
  }

  /**
   * Whether the next batch waits for company, and if so arranges for #pump(true) to run later:
   * after lingerMs, when set; or, while another batch is committing (so this one would not be
   * alone anyway), once this turn of the event loop has read what the sockets already hold
   * (setImmediate runs right after the poll phase), so items that arrived together go together.
   * No timer by default: an idle committer starts at once, and nothing waits for items that have
   * not arrived.
   */
  #holdBack(): boolean {
    if (this.#closed || this.#queue.length >= this.#maxBatch) return false;
    if (this.#lingerMs > 0) {
      this.#linger ??= setTimeout(() => {
        this.#linger = undefined;
        this.#pump(true);
      }, this.#lingerMs);
      return true;
    }
    if (this.#inFlight === 0) return false;
    if (!this.#gathering) {
      this.#gathering = true;
      setImmediate(() => {
        this.#gathering = false;
        this.#pump(true);
      });
    }
    return true;
  }

  async #commit(batch: Array<Pending<I, O>>): Promise<void> {
    this.stats.batches++;
    this.stats.items += batch.length;
    let results: O[];
    try {
      const items = batch.map((p) => p.item);
      results =
        (await this.#tryAlone(items)) ??
        (await withTransaction(this.#pool, (tx) => this.#apply(tx, items), { begin: this.#begin?.(items) }));
    } catch (err) {
      if (batch.length === 1) {
        batch[0]!.reject(err);
        return;
      }
      this.stats.splitBatches++;
      for (const p of batch) {
        try {
          p.resolve((await withTransaction(this.#pool, (tx) => this.#apply(tx, [p.item]), { begin: this.#begin?.([p.item]) }))[0]!);
        } catch (itemErr) {
          p.reject(itemErr);
        }
      }
      return;
    }
    batch.forEach((p, i) => p.resolve(results[i]!));
  }

  /** The batch by `alone` on a pooled connection outside any transaction; undefined when it declined (or there is none). */
  async #tryAlone(items: readonly I[]): Promise<O[] | undefined> {
    if (!this.#alone) return undefined;
    const client = await this.#pool.connect();
    let broken: Error | undefined;
    try {
      const results = await this.#alone(client, items);
      if (results) this.stats.alone++;
      return results;
    } catch (err) {
      // A statement Postgres refused (it has a SQLSTATE) leaves the connection usable; anything else may not.
      if (!(err as { code?: unknown }).code) broken = err instanceof Error ? err : new Error(String(err));
      throw err;
    } finally {
      client.release(broken);
    }
  }
}
