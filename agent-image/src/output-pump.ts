/**
 * Reads a job's output streams into the run's log: the bytes are masked on the way (core's
 * LogMasker: one log, so all streams in arrival order and each stream on its own), decoded as
 * UTF-8 with one streaming decoder per stream (a character split across reads stays whole) and
 * handed to the log shipper. Bytes that cannot start a secret go out at once; a tail that may be
 * the start of one is held until later bytes show it is not one, or the output ends (then a held
 * tail of 4+ characters is masked). There is no idle flush: a script that pauses between two halves
 * of a value (a `printf` of a slice, a sleep, a slow pipe, one half on stdout and one on stderr)
 * must not leak the first half. When the shipper is over its high-water mark, reading pauses until
 * it drains.
 */
import type { Readable } from "node:stream";
import { createLogMasker } from "@flowsvc/core";
import type { LogPiece } from "@flowsvc/core";
import type { LogShipper, LogStream } from "./log-shipper.js";

export interface MaskedLog {
  /**
   * Reads `source` into the log as `stream`. Resolves when it ended (or was destroyed) and, once
   * every stream of the log ended, when the last text is queued.
   */
  pump(source: Readable, stream: LogStream): Promise<void>;
}

/** One log that `streams` write into, masked with `masks`; pump each stream into it once. */
export const createMaskedLog = (masks: readonly string[], streams: readonly LogStream[], shipper: LogShipper): MaskedLog => {
  const masker = createLogMasker(masks, streams);
  const decoders = new Map(streams.map((s) => [s, new TextDecoder("utf-8")]));
  let open = streams.length;

  /** Queues the pieces; false when the shipper asks the reader to wait. */
  const put = (pieces: readonly LogPiece<LogStream>[]): boolean => {
    let room = true;
    for (const piece of pieces) {
      const text = toLogText((decoders.get(piece.stream) as InstanceType<typeof TextDecoder>).decode(piece.bytes, { stream: true }));
      if (text !== "" && !shipper.push(piece.stream, text)) room = false;
    }
    return room;
  };

  const finish = (): void => {
    for (const [stream, decoder] of decoders) {
      const text = toLogText(decoder.decode());
      if (text !== "") shipper.push(stream, text);
    }
  };

  return {
    pump: (source, stream) =>
      new Promise<void>((resolve) => {
        let ended = false;
        const end = (): void => {
          if (ended) return;
          ended = true;
          put(masker.end(stream));
          open -= 1;
          if (open === 0) finish();
          resolve();
        };
        source.on("data", (chunk: Buffer) => {
          if (!put(masker.push(stream, chunk)) && !source.isPaused()) {
            source.pause();
            void shipper.whenDrained().then(() => source.resume());
          }
        });
        source.once("end", end);
        source.once("close", end);
        source.once("error", end);
      }),
  };
};

/** Postgres text cannot hold NUL: show it as U+FFFD, as an invalid byte would be. */
const toLogText = (text: string): string => (text.includes("\0") ? text.replaceAll("\0", "\uFFFD") : text);
