/**
 * Retry with jittered exponential backoff. The agent's durable calls retry until they land
 * ("after server death the script keeps running, its pending calls retry, and they land when the
 * server is back"); only an abort (job lost, agent stopping) or a non-retryable error stops them.
 */
import { setTimeout as sleep } from "node:timers/promises";

export interface RetryOptions {
  /** Whether this error is worth another attempt (network errors, 5xx, 429). */
  readonly isRetryable: (err: unknown) => boolean;
  /** Stops the retries (and the wait between them) with the signal's reason. */
  readonly signal?: AbortSignal | undefined;
  /** Give up after this long (ms since the first attempt); unset means never. */
  readonly giveUpAfterMs?: number | undefined;
  readonly minDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Called before each wait; `attempt` counts failures so far (1 = the first failure). */
  readonly onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
}

/** Delay before retry number `attempt` (1-based): min·2^(n-1), capped, with ±20% jitter. */
export const backoffDelay = (attempt: number, minMs: number, maxMs: number, random: () => number = Math.random): number => {
  const base = Math.min(maxMs, minMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(base * (0.8 + 0.4 * random()));
};

/** The wait before the next attempt after failure number `failures`, or `err` thrown when it is the last. */
const delayAfter = (err: unknown, failures: number, options: RetryOptions, started: number): number => {
  const { signal, minDelayMs = 100, maxDelayMs = 5_000, giveUpAfterMs } = options;
  if (signal?.aborted) throw signal.reason;
  if (!options.isRetryable(err)) throw err;
  const delay = backoffDelay(failures, minDelayMs, maxDelayMs);
  if (giveUpAfterMs !== undefined && Date.now() - started + delay > giveUpAfterMs) throw err;
  return delay;
};

export const withRetry = async <T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T> => {
  const { signal } = options;
  const started = Date.now();
  for (let failures = 1; ; failures++) {
    signal?.throwIfAborted();
    try {
      return await attempt();
    } catch (err) {
      const delay = delayAfter(err, failures, options, started);
      options.onRetry?.(err, failures, delay);
      await sleep(delay, undefined, signal ? { signal } : undefined).catch(() => {
        throw signal?.reason ?? new Error("aborted");
      });
    }
  }
};
