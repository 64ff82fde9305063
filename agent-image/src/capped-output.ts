/**
 * Keeps a stream's bytes up to a limit and counts all of them (an activity child's stdout: the
 * step output limit applies, and the message says how far over). Reading goes on past the limit
 * so the writer never blocks on a full pipe.
 */
import type { Readable } from "node:stream";

export interface CappedOutput {
  /** Resolves when the stream ended (or was destroyed). */
  readonly done: Promise<void>;
  /** The bytes kept (at most `limit`). */
  bytes(): Buffer;
  /** Every byte read, kept or not. */
  total(): number;
}

export const collectCapped = (source: Readable, limit: number): CappedOutput => {
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let total = 0;
  const done = new Promise<void>((resolve) => {
    source.on("data", (chunk: Buffer) => {
      total += chunk.length;
      if (keptBytes < limit) {
        const part = chunk.subarray(0, limit - keptBytes);
        kept.push(part);
        keptBytes += part.length;
      }
    });
    source.once("end", resolve);
    source.once("close", resolve);
    source.once("error", () => resolve());
  });
  return { done, bytes: () => Buffer.concat(kept), total: () => total };
};
