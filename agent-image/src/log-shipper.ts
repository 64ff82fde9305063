/**
 * Ships masked output to `POST /agent/v1/log` in order. Text is queued as it arrives; a batch
 * leaves every `intervalMs`, or at once when `batchChars` are waiting. One request is in flight at
 * a time and `send` retries it until it lands, so order holds across a server outage. While the
 * backlog is over `highWaterChars`, `push` answers false: the output pump then stops reading the
 * script's pipes (the script blocks on write) instead of losing output or growing without bound.
 */
import type { LogChunk } from "@flowsvc/core";
import type { Logger } from "./logger.js";

export type LogStream = LogChunk["stream"];

export interface LogShipperOptions {
  /** Delivers one batch; resolves when the server took it (retrying inside as needed). */
  readonly send: (chunks: readonly LogChunk[]) => Promise<void>;
  readonly logger: Logger;
  readonly intervalMs?: number;
  readonly batchChars?: number;
  /** Upper bound of one request's text (the server's body limit must hold it JSON-escaped). */
  readonly maxRequestChars?: number;
  readonly highWaterChars?: number;
  /** Aborting drops what is queued and stops sending (the job was lost, the agent is stopping). */
  readonly signal?: AbortSignal;
}

const MAX_CHUNK_CHARS = 64 * 1024;

export class LogShipper {
  readonly #send: LogShipperOptions["send"];
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #batchChars: number;
  readonly #maxRequestChars: number;
  readonly #highWater: number;
  readonly #queue: LogChunk[] = [];
  #queuedChars = 0;
  #timer: NodeJS.Timeout | undefined;
  #sending: Promise<void> | undefined;
  #aborted = false;
  #drainWaiters: Array<() => void> = [];

  constructor(options: LogShipperOptions) {
    this.#send = options.send;
    this.#logger = options.logger;
    this.#intervalMs = options.intervalMs ?? 50;
    this.#batchChars = options.batchChars ?? 64 * 1024;
    this.#maxRequestChars = options.maxRequestChars ?? 256 * 1024;
    this.#highWater = options.highWaterChars ?? 16 * 1024 * 1024;
    if (options.signal?.aborted) this.abort();
    options.signal?.addEventListener("abort", () => this.abort(), { once: true });
  }

  /** Characters queued and not yet confirmed by the server. */
  get backlog(): number {
    return this.#queuedChars;
  }

  /** Queues text; answers false when the backlog is over the high-water mark (see whenDrained). */
  push(stream: LogStream, data: string): boolean {
    if (this.#aborted || data === "") return !this.#aborted;
    for (const piece of splitText(data, MAX_CHUNK_CHARS)) this.#append(stream, piece);
    if (this.#queuedChars >= this.#batchChars) this.#kick();
    else this.#timer ??= setTimeout(() => this.#kick(), this.#intervalMs);
    return this.#queuedChars < this.#highWater;
  }

  /** Resolves once the backlog is under the high-water mark (at once if it is). */
  whenDrained(): Promise<void> {
    if (this.#queuedChars < this.#highWater || this.#aborted) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /** Sends everything queued; resolves when the server has all of it (or the shipper is aborted). */
  async flush(): Promise<void> {
    while (!this.#aborted && (this.#queue.length > 0 || this.#sending)) {
      this.#kick();
      await this.#sending;
    }
  }

  /**
   * For the job's last request: waits for the batch in flight, then hands over what is still
   * queued when it fits one request (the caller sends it with the finish, in order after every
   * batch sent here), or ships it here and answers nothing to add. The shipper is then empty.
   */
  async takeRest(): Promise<LogChunk[]> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#sending) await this.#sending;
    if (this.#aborted) return [];
    const chars = this.#queue.reduce((n, c) => n + c.data.length, 0);
    if (chars > this.#maxRequestChars || this.#queue.length > 10_000) {
      await this.flush();
      return [];
    }
    const rest = this.#queue.splice(0);
    this.#queuedChars -= chars;
    this.#releaseDrainWaiters();
    return rest;
  }

  /** Drops what is queued and stops (the job was lost, or the agent is stopping). */
  abort(): void {
    this.#aborted = true;
    this.#queue.length = 0;
    this.#queuedChars = 0;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#releaseDrainWaiters();
  }

  #append(stream: LogStream, data: string): void {
    const last = this.#queue.at(-1);
    // Merge into the tail chunk unless it is the one being sent (it was moved out of the queue).
    if (last && last.stream === stream && last.data.length + data.length <= MAX_CHUNK_CHARS) {
      this.#queue[this.#queue.length - 1] = { stream, data: last.data + data };
    } else {
      this.#queue.push({ stream, data });
    }
    this.#queuedChars += data.length;
  }

  #kick(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#sending || this.#aborted || this.#queue.length === 0) return;
    this.#sending = this.#sendLoop().finally(() => {
      this.#sending = undefined;
    });
  }

  async #sendLoop(): Promise<void> {
    while (!this.#aborted && this.#queue.length > 0) {
      const batch = this.#takeBatch();
      const chars = batch.reduce((n, c) => n + c.data.length, 0);
      try {
        await this.#send(batch);
      } catch (err) {
        if (this.#aborted) return;
        // Not retryable (a 4xx other than a lost lease): keep the rest flowing, say what was lost.
        this.#logger.error({ err, chunks: batch.length, chars }, "the server refused a log batch; it is dropped");
      }
      this.#queuedChars -= chars;
      if (this.#queuedChars < this.#highWater) this.#releaseDrainWaiters();
      // Below a full batch, wait for more text to gather (the timer), unless a flush is waiting.
      if (this.#queuedChars < this.#batchChars && this.#queue.length > 0) {
        this.#timer ??= setTimeout(() => this.#kick(), this.#intervalMs);
        return;
      }
    }
  }

  #takeBatch(): LogChunk[] {
    const batch: LogChunk[] = [];
    let chars = 0;
    while (this.#queue.length > 0 && batch.length < 10_000) {
      const next = this.#queue[0]!;
      if (batch.length > 0 && chars + next.data.length > this.#maxRequestChars) break;
      batch.push(this.#queue.shift()!);
      chars += next.data.length;
    }
    return batch;
  }

  #releaseDrainWaiters(): void {
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const w of waiters) w();
  }
}

/** Splits text into pieces of at most `max` UTF-16 units, never between a surrogate pair. */
export const splitText = (text: string, max: number): string[] => {
  if (text.length <= max) return [text];
  const pieces: string[] = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + max, text.length);
    const code = text.charCodeAt(end - 1);
    if (end < text.length && code >= 0xd800 && code <= 0xdbff) end -= 1;
    pieces.push(text.slice(start, end));
    start = end;
  }
  return pieces;
};
