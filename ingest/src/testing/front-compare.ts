/**
 * For the tests of the requests served in front of Fastify (hook-front.test.ts,
 * journal-front.test.ts): one request sent over a real socket to the listening app and the same
 * by `app.inject()`, each answer reduced to what both ways must agree on, and a sink that keeps the
 * app's log lines.
 */
import { request } from "node:http";
import { Writable } from "node:stream";
import type { FastifyInstance } from "fastify";

export interface SentRequest {
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/** An answer as the comparison reads it: status, body text and the headers both ways must agree on. */
export interface Answer {
  status: number;
  text: string;
  headers: Record<string, string | undefined>;
}

const ANSWER_HEADERS = ["content-type", "x-request-id", "connection"] as const;

const pick = (h: Record<string, string | string[] | number | undefined>): Answer["headers"] =>
  Object.fromEntries(ANSWER_HEADERS.map((k) => [k, h[k] === undefined ? undefined : String(h[k])]));

/** POSTs over a real socket to the app listening at `base` (keep-alive, as agents and forges send). */
export const overSocket = (base: string, sent: SentRequest): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const req = request(`${base}${sent.path}`, { method: "POST", headers: { connection: "keep-alive", ...sent.headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString("utf8"), headers: pick(res.headers) }));
    });
    req.on("error", reject);
    req.end(sent.body ?? "");
  });

/** The same POST through Fastify's route (`app.inject()`). */
export const injected = async (app: FastifyInstance, sent: SentRequest): Promise<Answer> => {
  const res = await app.inject({
    method: "POST",
    url: sent.path,
    headers: { connection: "keep-alive", ...sent.headers },
    payload: sent.body ?? "",
  });
  return { status: res.statusCode, text: res.body, headers: pick(res.headers) };
};

/** A pino destination that parses every line into `lines`. */
export const logSink = (lines: Array<Record<string, unknown>>): Writable =>
  new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
