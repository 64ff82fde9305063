/**
 * Reads one of the script's output streams, masks it on the byte stream (core's Masker), decodes
 * it as UTF-8 with a streaming decoder (a character split across reads stays whole) and hands the
 * text to the log shipper. Bytes that cannot start a secret go out at once; only a tail that may be
 * the start of one is held, and flushed after `idleMs` without data and at the end. The hold is a
 * full second, not a few milliseconds: a script that pauses between two halves of a value (a
 * `printf` of a slice, a sleep, a slow pipe) must not leak the first half. It delays nothing else. When the shipper is over its high-water mark, reading pauses until it drains.
 */
import type { Readable } from "node:stream";
import type { Masker } from "@flowsvc/core";
import type { LogShipper, LogStream } from "./log-shipper.js";

export interface OutputPump {
  /** Resolves when the stream ended (or was destroyed) and its last text was queued. */
  readonly done: Promise<void>;
}

export const pumpOutput = (source: Readable, stream: LogStream, masker: Masker, shipper: LogShipper, idleMs = 1000): OutputPump => {
  const decoder = new TextDecoder("utf-8");
  let idle: NodeJS.Timeout | undefined;

  const emit = (bytes: Uint8Array, final: boolean): void => {
    const text = toLogText(decoder.decode(bytes, { stream: !final }));
    if (text !== "" && !shipper.push(stream, text) && !source.isPaused()) {
      source.pause();
      void shipper.whenDrained().then(() => source.resume());
    }
  };

  const done = new Promise<void>((resolve) => {
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      clearTimeout(idle);
      emit(masker.flush(), true);
      resolve();
    };
    source.on("data", (chunk: Buffer) => {
      clearTimeout(idle);
      emit(masker.push(chunk), false);
      if (masker.pending > 0) idle = setTimeout(() => emit(masker.flush(), false), idleMs);
    });
    source.once("end", end);
    source.once("close", end);
    source.once("error", end);
  });
  return { done };
};

/** Postgres text cannot hold NUL: show it as U+FFFD, as an invalid byte would be. */
const toLogText = (text: string): string => (text.includes("\0") ? text.replaceAll("\0", "\uFFFD") : text);
