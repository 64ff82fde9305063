import type { Pool } from "pg";
import { dueWaits, resolveDueWait, withTransaction } from "@flowsvc/store";
import type { ControllerLogger } from "./dispatcher.js";

const TICK_MS = 200;

/**
 * Fires timers: a sleep whose wake time came, a bounded wait whose timeout passed. Each resolves
 * in its own transaction (run row first, then its journal row, the order every wake path uses)
 * and wakes the run.
 */
export class TimerLoop {
  readonly #pool: Pool;
  readonly #error: (obj: Record<string, unknown>, msg: string) => void;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;

  /** A failed pass is logged at error through a levelled logger, or given to `log`. */
  constructor(pool: Pool, log: ControllerLogger | ((obj: Record<string, unknown>, msg: string) => void)) {
    this.#pool = pool;
    this.#error = typeof log === "function" ? log : (obj, msg) => log.error(obj, msg);
  }

  start(): void {
    this.#timer = setInterval(() => void this.tick(), TICK_MS);
  }

  async tick(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      for (const w of await dueWaits(this.#pool)) {
        await withTransaction(this.#pool, (tx) => resolveDueWait(tx, w.run_id, w.position));
      }
    } catch (err) {
      this.#error({ err }, "timer pass failed; retrying on the next tick");
    } finally {
      this.#busy = false;
    }
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
  }
}
