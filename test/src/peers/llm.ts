/**
 * A protocol-faithful peer of the Anthropic Messages API (`POST /v1/messages`), for the
 * `anthropic.messages` connector and the spec's model patterns. It checks what the real API checks
 * before answering: the `x-api-key` header (401 authentication_error), the `anthropic-version`
 * header (400), a JSON body with `model` (string), `max_tokens` (integer >= 1) and a non-empty
 * `messages` array of `{role: user|assistant, content}` starting with a user turn (400
 * invalid_request_error naming the field). It answers a Message object as the real API does
 * (`content: [{type: "text", text}]`, `stop_reason`, `usage`); the reply text is scripted.
 */
import { randomUUID } from "node:crypto";
import { Peer, type PeerAnswer, type PeerRequest } from "./peer.js";

export interface LlmMessage {
  role: string;
  content: unknown;
}

export interface LlmCall {
  model: string;
  max_tokens: number;
  messages: LlmMessage[];
  /** The text of the last user turn: what a scripted reply usually looks at. */
  prompt: string;
}

/** A scripted reply: the text, or a whole answer (an overload, a 500...). */
export type LlmReply = string | PeerAnswer;

export interface LlmPeerOptions {
  /** The key the peer accepts in `x-api-key`. */
  apiKey: string;
  /** The reply to each valid call; default: a queue of `replies`, then "ok". */
  reply?: (call: LlmCall) => LlmReply;
}

const error = (status: number, type: string, message: string): PeerAnswer => ({
  status,
  body: { type: "error", error: { type, message }, request_id: `req_${randomUUID().replaceAll("-", "")}` },
});

const textOf = (content: unknown): string => {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content
      .map((b) =>
        typeof b === "object" && b !== null && (b as { type?: unknown }).type === "text" ? String((b as { text?: unknown }).text) : "",
      )
      .join("");
  return "";
};

const messageProblem = (m: unknown, i: number): string | undefined => {
  const role = (m as { role?: unknown } | null)?.role;
  if (role !== "user" && role !== "assistant") return `messages.${i}.role: Input should be 'user' or 'assistant'`;
  const content = (m as { content?: unknown }).content;
  if (typeof content !== "string" && !Array.isArray(content)) return `messages.${i}.content: Input should be a valid string or list`;
  return undefined;
};

const messagesProblem = (messages: unknown): string | undefined => {
  if (!Array.isArray(messages) || messages.length === 0) return "messages: at least one message is required";
  for (const [i, m] of messages.entries()) {
    const p = messageProblem(m, i);
    if (p !== undefined) return p;
  }
  return (messages[0] as LlmMessage).role === "user" ? undefined : 'messages: first message must use the "user" role';
};

/** The first problem of a Messages request body, as the API words it; undefined when valid. */
const bodyProblem = (body: unknown): string | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return "request body must be a JSON object";
  const b = body as Record<string, unknown>;
  if (typeof b["model"] !== "string" || b["model"] === "") return "model: Field required";
  const max = b["max_tokens"];
  if (typeof max !== "number" || !Number.isInteger(max) || max < 1)
    return "max_tokens: Input should be a valid integer greater than or equal to 1";
  return messagesProblem(b["messages"]);
};

export class LlmPeer extends Peer {
  readonly #apiKey: string;
  readonly #reply: (call: LlmCall) => LlmReply;
  /** Replies used in order by the default `reply`. */
  readonly replies: LlmReply[] = [];
  /** Every valid call answered, in order. */
  readonly calls: LlmCall[] = [];

  constructor(opts: LlmPeerOptions) {
    super();
    this.#apiKey = opts.apiKey;
    this.#reply = opts.reply ?? (() => this.replies.shift() ?? "ok");
  }

  protected handle(req: PeerRequest): PeerAnswer {
    if (req.method !== "POST" || req.path.split("?")[0] !== "/v1/messages") return error(404, "not_found_error", `Not Found: ${req.path}`);
    const key = req.headers["x-api-key"];
    if (key === undefined) return error(401, "authentication_error", "x-api-key header is required");
    if (key !== this.#apiKey) return error(401, "authentication_error", "invalid x-api-key");
    if (req.headers["anthropic-version"] === undefined) return error(400, "invalid_request_error", "anthropic-version: header is required");
    if (!String(req.headers["content-type"] ?? "").startsWith("application/json"))
      return error(400, "invalid_request_error", "Content-Type must be application/json");
    const problem = req.json === undefined ? "There was an issue with your request body: invalid JSON" : bodyProblem(req.json);
    if (problem !== undefined) return error(400, "invalid_request_error", problem);
    const body = req.json as { model: string; max_tokens: number; messages: LlmMessage[] };
    const users = body.messages.filter((m) => m.role === "user");
    const call: LlmCall = {
      model: body.model,
      max_tokens: body.max_tokens,
      messages: body.messages,
      prompt: textOf(users.at(-1)?.content),
    };
    this.calls.push(call);
    const reply = this.#reply(call);
    if (typeof reply !== "string") return reply;
    return {
      status: 200,
      headers: { "request-id": `req_${randomUUID().replaceAll("-", "")}` },
      body: {
        id: `msg_${randomUUID().replaceAll("-", "")}`,
        type: "message",
        role: "assistant",
        model: body.model,
        content: [{ type: "text", text: reply }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { input_tokens: Math.ceil(call.prompt.length / 4), output_tokens: Math.ceil(reply.length / 4) },
      },
    };
  }
}

/**
 * The replies of the examples' test model (examples/graphs/llm-peer.mjs and test/src/approvals.test.ts),
 * by the change named in the prompt: a routing question (`Reply with exactly one word`) is answered
 * `auto` for a docs change, a sentence that contains the word auto for a change marked `maybe`, and
 * `human` otherwise; any other prompt gets a paragraph of advice.
 */
export const exampleReply = (call: LlmCall): string => {
  const change = /Change: (.*)/.exec(call.prompt)?.[1] ?? "";
  if (call.prompt.startsWith("Reply with exactly one word")) {
    if (/^docs\b/.test(change)) return "auto";
    if (/\bmaybe\b/.test(change)) return "I would say auto, but check the migration first.";
    return "human";
  }
  return `The change "${change}" touches the deploy path. Check the database migration and the rollback before approving.`;
};
