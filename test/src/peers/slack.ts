/**
 * A protocol-faithful peer of Slack's `chat.postMessage` (`POST /api/chat.postMessage`). As Slack
 * does, every answer is HTTP 200 with `ok`: a missing token is `not_authed`, a wrong one
 * `invalid_auth`, an unknown channel `channel_not_found`, no text and no blocks `no_text`; a good
 * call answers `{ok: true, channel, ts, message}`. The token arrives as `Authorization: Bearer`.
 */
import { Peer, type PeerAnswer, type PeerRequest } from "./peer.js";

export interface SlackPeerOptions {
  /** The bot token Slack accepts. */
  token: string;
  /** The channel ids that exist; default: any channel. */
  channels?: string[];
}

export interface SlackPost {
  channel: string;
  text: string;
  ts: string;
}

const fail = (error: string): PeerAnswer => ({ status: 200, body: { ok: false, error } });

export class SlackPeer extends Peer {
  readonly #token: string;
  readonly #channels: string[] | undefined;
  /** Every message posted. */
  readonly posts: SlackPost[] = [];

  constructor(opts: SlackPeerOptions) {
    super();
    this.#token = opts.token;
    this.#channels = opts.channels;
  }

  /** Slack's refusal of a call, in its order: method, auth, body, channel, text. */
  #refusal(req: PeerRequest): string | undefined {
    if (req.method !== "POST") return "invalid_request";
    const auth = req.headers["authorization"];
    if (auth === undefined) return "not_authed";
    if (auth !== `Bearer ${this.#token}`) return "invalid_auth";
    if (req.json === undefined || typeof req.json !== "object" || req.json === null) return "invalid_json";
    return this.#bodyRefusal(req.json as Record<string, unknown>);
  }

  #bodyRefusal(body: Record<string, unknown>): string | undefined {
    const channel = body["channel"];
    if (typeof channel !== "string" || channel === "" || (this.#channels && !this.#channels.includes(channel))) return "channel_not_found";
    const text = body["text"];
    if ((typeof text !== "string" || text === "") && body["blocks"] === undefined) return "no_text";
    return undefined;
  }

  protected handle(req: PeerRequest): PeerAnswer {
    if (req.path.split("?")[0] !== "/api/chat.postMessage") return { status: 404, body: { ok: false, error: "unknown_method" } };
    const refusal = this.#refusal(req);
    if (refusal !== undefined) return fail(refusal);
    const body = req.json as Record<string, unknown>;
    const channel = body["channel"] as string;
    const text = typeof body["text"] === "string" ? body["text"] : "";
    const ts = `${Math.floor(Date.now() / 1000)}.${String(this.posts.length + 1).padStart(6, "0")}`;
    this.posts.push({ channel, text, ts });
    return {
      status: 200,
      body: {
        ok: true,
        channel,
        ts,
        message: { type: "message", subtype: "bot_message", text, user: "U0FLOWBOT", bot_id: "B0FLOWBOT", ts },
      },
    };
  }
}
