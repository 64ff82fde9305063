/**
 * `state get|set|delete|list` (spec, "In-script primitives"): not durable, so it takes no position
 * and runs on every pass; the backend answers it (POST /agent/v1/state). `set` takes JSON text, or
 * keeps the text as a bare string when it is not JSON. `get` prints a string value raw and any
 * other value as JSON, nothing when unset; `list` prints `key<TAB>value` lines, values as for get.
 */
import { z } from "zod";
import { FlowError, StateRequestSchema } from "@flowsvc/core";
import type { StateRequest } from "@flowsvc/core";
import type { StateAnswer } from "./backend.js";
import type { OpContext } from "./op-kit.js";
import { b64, ok, parseRequest } from "./op-kit.js";
import type { HandlerResult } from "./socket-server.js";

const StateSocketRequest = z.object({
  action: z.enum(["get", "set", "delete", "list"]),
  key: z.string().optional(),
  entity: z.string().optional(),
  value: z.string().optional(),
});

/** `set`'s value: JSON when it parses as JSON, the bare string otherwise. */
export const parseStateValue = (text: string): unknown => {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
};

/** How a value prints: a string as is, anything else as JSON. */
export const formatStateValue = (value: unknown): string => (typeof value === "string" ? value : JSON.stringify(value ?? null));

/** A line of output: the text and a newline, unless it already ends with one. */
const line = (text: string): string => (text.endsWith("\n") ? text : `${text}\n`);

/** What the client prints for an answer of `action`. */
export const stateOutput = (action: StateRequest["op"], answer: StateAnswer): string => {
  if (action === "get") {
    const found = answer.found ?? answer.value !== undefined;
    return found ? line(formatStateValue(answer.value)) : "";
  }
  if (action === "list") return (answer.items ?? []).map((i) => `${i.key}\t${formatStateValue(i.value)}\n`).join("");
  return "";
};

/** The backend's request for a socket request (a `set` value parsed as parseStateValue says). */
const stateBody = (req: z.infer<typeof StateSocketRequest>): StateRequest => {
  if (req.action === "set" && req.value === undefined) throw new FlowError("invalid_argument", "bad state set request: value is required");
  return parseRequest(StateRequestSchema, `state ${req.action}`, {
    op: req.action,
    ...(req.key !== undefined ? { key: req.key } : {}),
    ...(req.entity !== undefined ? { entity: req.entity } : {}),
    ...(req.action === "set" ? { value: parseStateValue(req.value ?? "") } : {}),
  });
};

/**
 * The raw JSON of an answer: the CLI clients print stdout_b64, the SDKs read `value`/`items` and
 * keep types (a stored string "1.10" stays a string).
 */
const stateJson = (op: StateRequest["op"], answer: StateAnswer): Record<string, unknown> => {
  if (op === "get") return { found: answer.found ?? answer.value !== undefined, value: answer.value ?? null };
  if (op === "list") return { items: answer.items ?? [] };
  return {};
};

export const stateOp = async (ctx: OpContext, raw: unknown): Promise<HandlerResult> => {
  const body = stateBody(parseRequest(StateSocketRequest, "state", raw));
  const answer = await ctx.backend.state(body);
  const output = stateOutput(body.op, answer);
  return ok({ ...(output === "" ? {} : { stdout_b64: b64(output) }), ...stateJson(body.op, answer) });
};
