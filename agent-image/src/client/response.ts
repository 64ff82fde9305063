/**
 * Answers of socket protocol v2 (docs/internals.md): validated the way the native client's
 * reader validates them (agent-image/native/flow.c), then applied in the documented order:
 * error, stdout_b64, stderr, exit.
 */
import { fstatSync } from "node:fs";
import { ClientError, say, writeAll } from "./io.js";

export interface AgentResponse {
  ok: boolean;
  /** The protocol version the answer claims; an answer without `v` is taken as version 1. */
  v: number;
  replay: boolean;
  exit?: number;
  protocol?: number;
  captureIno?: number;
  stdout?: Buffer;
  stderr?: string;
  errorMessage?: string;
  position?: number | string;
  idempotencyKey?: string;
}

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

const isInt32 = (x: unknown): x is number => Number.isInteger(x) && (x as number) >= INT32_MIN && (x as number) <= INT32_MAX;

const isStrictBase64 = (s: string): boolean => {
  if (s.length % 4 !== 0) return false;
  const pad = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
  return !/[^A-Za-z0-9+/]/.test(s.slice(0, s.length - pad));
};

const malformed = (why: string): ClientError => new ClientError([`error: malformed response from the agent: ${why}`]);

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);

type FieldReader = (value: unknown, out: AgentResponse) => boolean;

/** One entry per field a client reads; null means absent; anything else is skipped. */
const FIELDS: Readonly<Record<string, FieldReader>> = {
  ok: (x, out) => typeof x === "boolean" && ((out.ok = x), true),
  replay: (x, out) => typeof x === "boolean" && ((out.replay = x), true),
  v: (x, out) => isInt32(x) && ((out.v = x), true),
  protocol: (x, out) => isInt32(x) && ((out.protocol = x), true),
  exit: (x, out) => isInt32(x) && ((out.exit = x), true),
  capture_ino: (x, out) => Number.isInteger(x) && (x as number) >= 0 && ((out.captureIno = x as number), true),
  stdout_b64: (x, out) => typeof x === "string" && isStrictBase64(x) && ((out.stdout = Buffer.from(x, "base64")), true),
  stderr: (x, out) => typeof x === "string" && ((out.stderr = x), true),
  idempotency_key: (x, out) => typeof x === "string" && ((out.idempotencyKey = x), true),
  position: (x, out) => (typeof x === "string" || typeof x === "number") && ((out.position = x), true),
  error: (x, out) => {
    if (!isObject(x)) return false;
    const message = x.message ?? undefined;
    if (message !== undefined && typeof message !== "string") return false;
    if (message !== undefined) out.errorMessage = message;
    return true;
  },
};

/** Parses one response line; throws a ClientError naming the first field that is wrong. */
export const parseResponse = (line: Buffer): AgentResponse => {
  let body: unknown;
  try {
    body = JSON.parse(line.toString("utf8"));
  } catch {
    throw malformed("not a JSON object");
  }
  if (!isObject(body)) throw malformed("not a JSON object");
  const out: AgentResponse = { ok: false, v: 1, replay: false };
  let hasOk = false;
  for (const [key, value] of Object.entries(body)) {
    const read = FIELDS[key];
    if (value === null || read === undefined) continue;
    if (!read(value, out)) throw malformed(key);
    if (key === "ok") hasOk = true;
  }
  if (!hasOk) throw malformed("ok");
  return out;
};

/** The one place that refuses an agent too old for a call (bounded waits need protocol v2). */
export const checkProtocol = (agent: number, minProtocol: number): void => {
  if (agent >= minProtocol) return;
  throw new ClientError([
    `error: the agent speaks socket protocol v${agent}; this call needs v${minProtocol}`,
    "upgrade the flowsvc agent, or drop --timeout",
  ]);
};

/** True when fd 1 is the agent's capture pipe: replayed output is then already in the log. */
const stdoutIsCapture = (captureIno: number | undefined): boolean => {
  if (captureIno === undefined) return false;
  try {
    const st = fstatSync(1, { bigint: true });
    return st.isFIFO() && st.ino === BigInt(captureIno);
  } catch {
    return false;
  }
};

export const applyOutput = (r: AgentResponse): void => {
  if (r.stdout !== undefined && !(r.replay && stdoutIsCapture(r.captureIno))) writeAll(1, r.stdout);
  if (r.stderr !== undefined) writeAll(2, Buffer.from(r.stderr, "utf8"));
};

/** The generic handling of an answer; returns the exit status. */
export const applyResponse = (r: AgentResponse, defaultExit: number): number => {
  if (!r.ok) {
    say(2, `error: ${r.errorMessage ?? "the agent refused the call"}`);
    return r.exit === undefined ? 1 : r.exit & 255;
  }
  applyOutput(r);
  return r.exit === undefined ? defaultExit : r.exit & 255;
};
