import type { Pool } from "pg";
import { dueWaits, fireDueSchedules, resolveDueWait, withTransaction } from "@flowsvc/store";
import type { ControllerLogger } from "./dispatcher.js";

const TICK_MS = 200;

type LogFn = (obj: Record<string, unknown>, msg: string) => void;

export interface TimerLoopOptions {
  /** The clock schedules are fired by (a test moves it); the system clock by default. */
  now?: () => Date;
}

/**
 * Fires timers: a sleep whose wake time came, a bounded wait whose timeout passed. Each resolves
 * in its own transaction (run row first, then its journal row, the order every wake path uses)
 * and wakes the run. Then due schedules: each tick records `schedule.tick`, submits its run and
 * moves the schedule's next fire time, in one transaction that holds the schedule's row
 * (store/src/schedules.ts), so two controllers never fire one tick. In kubernetes mode only the
 * leader runs this loop.
 */
export class TimerLoop {
  readonly #pool: Pool;
  readonly #error: LogFn;
  readonly #info: LogFn;
  readonly #now: () => Date;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;

  /** A failed pass is logged at error through a levelled logger, or given to `log`. */
  constructor(pool: Pool, log: ControllerLogger | LogFn, opts: TimerLoopOptions = {}) {
    this.#pool = pool;
    this.#error = typeof log === "function" ? log : (obj, msg) => log.error(obj, msg);
    this.#info = typeof log === "function" ? () => undefined : (obj, msg) => log.info(obj, msg);
    this.#now = opts.now ?? (() => new Date());
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
      const { fired, failed } = await fireDueSchedules(this.#pool, this.#now());
      for (const f of failed) this.#error({ err: f.err, scheduleId: f.scheduleId }, "schedule tick failed; retrying on the next tick");
      for (const t of fired) {
        this.#info(
          {
            schedule: t.name,
            scheduleId: t.scheduleId,
            eventId: t.eventId,
            runId: t.runId,
            nextFireAt: t.nextFireAt?.toISOString() ?? null,
          },
          "schedule fired",
        );
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
