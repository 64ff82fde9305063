/**
 * FLOW_AGENT_SOCKET: a Unix stream socket that speaks one JSON object per line each way
 * (docs/internals.md, "In-script socket protocol"). This file is the framing only: it reads a line,
 * asks the handler, writes the answer, and reads the next request on the same connection. A handler
 * may answer nothing (a call that suspends the run gets no answer).
 */
import { rm } from "node:fs/promises";
import { createServer } from "node:net";
import type { Server, Socket } from "node:net";
import { SOCKET_PROTOCOL_VERSION } from "@flowsvc/core";
import type { Logger } from "./logger.js";

export type SocketResponse = Record<string, unknown>;

export interface HandlerResult {
  /** The answer (without `v`); undefined: no answer, the connection stays open until it closes. */
  readonly response?: SocketResponse;
  /** Runs once the answer was handed to the kernel (or the connection went away). */
  readonly afterAnswer?: () => void;
}

export type SocketHandler = (request: Record<string, unknown>) => Promise<HandlerResult>;

export interface SocketServer {
  readonly path: string;
  close(): Promise<void>;
}

/** A step.complete carries up to 2 MiB of stdout as base64; leave room. */
const MAX_LINE_BYTES = 8 * 1024 * 1024;

export const errorResponse = (code: string, message: string, exit = 1): SocketResponse => ({ ok: false, error: { code, message }, exit });

/**
 * `fresh`: `path` is in a directory made for this job a moment ago, so nothing can be there yet and
 * no stale socket is removed first (an lstat that fails, per job).
 */
export const startSocketServer = async (
  path: string,
  handle: SocketHandler,
  logger: Logger,
  options: { readonly fresh?: boolean } = {},
): Promise<SocketServer> => {
  const connections = new Set<Socket>();
  const server: Server = createServer((socket) => {
    connections.add(socket);
    socket.once("close", () => connections.delete(socket));
    serveConnection(socket, handle, logger);
  });
  if (options.fresh !== true) await rm(path, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    // The socket is 0600 from its bind, which listen() does synchronously: the umask holds for that
    // call only (no window with wider permissions, and no chmod after it: one file call fewer a job).
    const umask = process.umask(0o177);
    try {
      server.listen(path, () => {
        server.off("error", reject);
        resolve();
      });
    } finally {
      process.umask(umask);
    }
  });
  server.on("error", (err) => logger.error({ err }, "agent socket failed"));
  return {
    path,
    close: async () => {
      for (const s of connections) s.destroy();
      // libuv unlinks a listening Unix socket's path when it closes it: nothing is left to remove.
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
};

const write = (socket: Socket, response: SocketResponse, after?: () => void): void => {
  const line = `${JSON.stringify({ v: SOCKET_PROTOCOL_VERSION, ...response })}\n`;
  if (socket.destroyed || !socket.writable) {
    after?.();
    return;
  }
  socket.write(line, () => after?.());
};

const serveConnection = (socket: Socket, handle: SocketHandler, logger: Logger): void => {
  let buffered: Buffer[] = [];
  let bufferedBytes = 0;
  let busy = false;
  const lines: Buffer[] = [];
  socket.on("error", (err) => logger.debug({ err }, "agent socket connection error"));

  const next = async (): Promise<void> => {
    if (busy) return;
    busy = true;
    try {
      for (let line = lines.shift(); line !== undefined; line = lines.shift()) {
        // One UTF-8 decode per line (a step.complete carries up to 2 MiB of stdout as base64).
        const text = line.toString("utf8");
        if (text.trim() === "") continue;
        const request = parseRequest(text);
        if ("error" in request) {
          write(socket, request.error);
          continue;
        }
        const result = await handle(request.value).catch((err: unknown): HandlerResult => {
          logger.error({ err }, "socket request failed");
          return { response: errorResponse("internal", `the agent failed this call: ${(err as Error).message}`) };
        });
        if (result.response) write(socket, result.response, result.afterAnswer);
        else result.afterAnswer?.();
      }
    } finally {
      busy = false;
    }
  };

  socket.on("data", (chunk: Buffer) => {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      buffered.push(chunk.subarray(start, nl));
      lines.push(Buffer.concat(buffered));
      buffered = [];
      bufferedBytes = 0;
      start = nl + 1;
    }
    if (start < chunk.length) {
      buffered.push(chunk.subarray(start));
      bufferedBytes += chunk.length - start;
    }
    if (bufferedBytes > MAX_LINE_BYTES) {
      write(socket, errorResponse("payload_too_large", `a request line is over ${MAX_LINE_BYTES} bytes`), () => socket.destroy());
      buffered = [];
      bufferedBytes = 0;
      return;
    }
    void next();
  });
};

const parseRequest = (line: string): { value: Record<string, unknown> } | { error: SocketResponse } => {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { error: errorResponse("invalid_argument", "a socket request must be one JSON object per line") };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { error: errorResponse("invalid_argument", "a socket request must be a JSON object") };
  }
  return { value: value as Record<string, unknown> };
};
