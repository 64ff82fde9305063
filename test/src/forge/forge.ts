/**
 * A test forge: builds GitHub deliveries, signs them exactly as GitHub does (HMAC-SHA256 of the raw
 * body bytes under the webhook's secret, `X-Hub-Signature-256: sha256=<hex>`, plus the legacy
 * SHA-1 header) and posts them with GitHub's headers to an ingest URL. A redelivery repeats the
 * same delivery id and the same bytes, as GitHub's "Redeliver" button does.
 */
import { createHmac, randomUUID } from "node:crypto";
import { request } from "undici";
import { issueCommentBody, pingBody, pullRequestBody, pushBody } from "./github-payloads.js";

export interface Delivery {
  /** X-GitHub-Delivery */
  id: string;
  /** X-GitHub-Event */
  event: string;
  /** The exact bytes sent and signed. */
  body: Buffer;
}

export type SignatureMode = "good" | "missing" | "wrong" | "malformed";

export interface SendOptions {
  /** How to sign: the hook's key (good), not at all, with another key, or a value that is not hex. */
  signature?: SignatureMode;
  /** Extra headers (e.g. X-Flow-Hook-Secret), or overrides of GitHub's. */
  headers?: Record<string, string>;
}

export interface ForgeAnswer {
  status: number;
  text: string;
  json: unknown;
}

export const HOOKSHOT_USER_AGENT = "GitHub-Hookshot/7a4f2b1";

export const signSha256 = (key: string, body: Buffer): string => `sha256=${createHmac("sha256", key).update(body).digest("hex")}`;
const signSha1 = (key: string, body: Buffer): string => `sha1=${createHmac("sha1", key).update(body).digest("hex")}`;

export class TestForge {
  readonly url: string;
  readonly key: string;
  /** Every delivery sent, in order (redeliveries included). */
  readonly sent: Array<{ delivery: Delivery; status: number }> = [];

  /** `url` is the hook's ingest URL; `key` the webhook secret configured on the forge (the hook's --key). */
  constructor(opts: { url: string; key: string }) {
    this.url = opts.url;
    this.key = opts.key;
  }

  /** A delivery of `event` with `body` serialised as GitHub does (compact JSON, UTF-8); `pretty` indents it. */
  delivery(event: string, body: unknown, pretty = false): Delivery {
    return { id: randomUUID(), event, body: Buffer.from(JSON.stringify(body, null, pretty ? 2 : undefined), "utf8") };
  }

  push(opts: Parameters<typeof pushBody>[0]): Delivery {
    return this.delivery("push", pushBody(opts));
  }

  pullRequest(opts: Parameters<typeof pullRequestBody>[0]): Delivery {
    return this.delivery("pull_request", pullRequestBody(opts));
  }

  issueComment(opts: Parameters<typeof issueCommentBody>[0]): Delivery {
    return this.delivery("issue_comment", issueCommentBody(opts));
  }

  ping(repo: string): Delivery {
    return this.delivery("ping", pingBody(repo));
  }

  /** The headers GitHub sends with a delivery. */
  headers(d: Delivery, signature: SignatureMode = "good"): Record<string, string> {
    const key = signature === "wrong" ? `${this.key}-not` : this.key;
    const h: Record<string, string> = {
      "content-type": "application/json",
      "user-agent": HOOKSHOT_USER_AGENT,
      "x-github-event": d.event,
      "x-github-delivery": d.id,
      "x-github-hook-id": "292430182",
      "x-github-hook-installation-target-type": "repository",
      "x-github-hook-installation-target-id": "79929171",
    };
    if (signature === "malformed") {
      h["x-hub-signature-256"] = "sha256=not-a-hex-digest";
      h["x-hub-signature"] = "sha1=zz";
    } else if (signature !== "missing") {
      h["x-hub-signature-256"] = signSha256(key, d.body);
      h["x-hub-signature"] = signSha1(key, d.body);
    }
    return h;
  }

  async send(d: Delivery, opts: SendOptions = {}): Promise<ForgeAnswer> {
    const res = await request(this.url, { method: "POST", headers: { ...this.headers(d, opts.signature), ...opts.headers }, body: d.body });
    const text = await res.body.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    this.sent.push({ delivery: d, status: res.statusCode });
    return { status: res.statusCode, text, json };
  }

  /** GitHub's "Redeliver": the same delivery id and the same bytes, signed again. */
  redeliver(d: Delivery, opts: SendOptions = {}): Promise<ForgeAnswer> {
    return this.send({ ...d }, opts);
  }
}
