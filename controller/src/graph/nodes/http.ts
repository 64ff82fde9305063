/**
 * The `http` node (issue 10, "Node types"): one request with undici. Config: `url` (required),
 * `method` (GET), `headers`, `body` (a string is sent as is, anything else as JSON), `credential`
 * (a name; its auth by kind through core's renderHttpAuth: an explicit `headers:` entry wins, a
 * url-token replaces `{credential}` in the url), `timeout` (30s, at most 10m). The credential is
 * resolved before anything is sent: a name that matches nothing fails the node and no request
 * leaves. Output `{status, headers, body}`, body parsed as JSON when the response says JSON; a
 * non-2xx status fails the attempt (the retry policy applies) and keeps the output. A response
 * over RESPONSE_LIMIT fails the attempt.
 *
 * The request runs in the controller's own process, so it goes through `ctx.egress`, the
 * deployable's egress-guarded dispatcher (controller/src/net/egress-agent.ts): the address it
 * connects to, after DNS, must be one the operator's policy allows (never link-local or metadata;
 * loopback and private ranges only where allowed), else the node fails with
 * `config.url: <host> resolves to <address>, a private address; ...` and nothing is sent.
 * Redirects are not followed: a 3xx is the answer (and fails the attempt). Messages name the
 * URL's host only, never its path or query (a url-token credential may be there).
 */
import { request } from "undici";
import { EgressRefusedError } from "../../net/egress-agent.js";
import { HTTP_METHODS, HTTP_TIMEOUT_MAX_MS, renderHttpAuth } from "@flowsvc/core";
import type { NodeContext, NodeExecutor, NodeOutcome } from "./types.js";
import { asConfig, durationMs, requiredStr, str, stringMap, type Config } from "./config.js";

export const RESPONSE_LIMIT = 4 * 1024 * 1024;
const DEFAULT_TIMEOUT_MS = 30_000;

interface Prepared {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
  timeoutMs: number;
}

const hasHeader = (headers: Record<string, string>, name: string): boolean => Object.keys(headers).some((h) => h.toLowerCase() === name);

const bodyOf = (c: Config, headers: Record<string, string>): string | undefined => {
  const body = c["body"];
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return body;
  if (!hasHeader(headers, "content-type")) headers["content-type"] = "application/json";
  return JSON.stringify(body);
};

const prepare = async (ctx: NodeContext): Promise<Prepared> => {
  const c = asConfig(ctx.config);
  // What an expression yields is held to the check's rules (core's node-configs): the seven methods, header values on one line.
  const method = (str(c, "method") ?? "GET").toUpperCase();
  if (!(HTTP_METHODS as readonly string[]).includes(method))
    throw new Error(`config.method: ${JSON.stringify(method)} is not one of ${HTTP_METHODS.join(", ")}`);
  let url = requiredStr(c, "url");
  let headers = stringMap(c, "headers");
  for (const [k, v] of Object.entries(headers))
    if (/[\r\n\0]/.test(v)) throw new Error(`config.headers.${k}: a header value cannot hold a line break or NUL`);
  const name = str(c, "credential");
  if (name !== undefined) {
    const cred = await ctx.credential(name);
    ({ url, headers } = renderHttpAuth(name, cred.value, { url, headers }));
  }
  const parsed = URL.parse(url);
  if (parsed === null) throw new Error("config.url: is not an absolute http(s) URL");
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new Error(`config.url: only http and https URLs are fetched`);
  headers = { ...headers };
  return { method, url, headers, body: bodyOf(c, headers), timeoutMs: durationMs(c, "timeout", DEFAULT_TIMEOUT_MS, HTTP_TIMEOUT_MAX_MS) };
};

const readCapped = async (body: AsyncIterable<Buffer>, limit: number): Promise<Buffer | undefined> => {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
};

const isJson = (contentType: string | undefined): boolean => contentType !== undefined && /[/+]json\b/i.test(contentType);

const parseBody = (raw: Buffer, contentType: string | undefined): unknown => {
  const text = raw.toString("utf8");
  if (!isJson(contentType)) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
};

const flatHeaders = (headers: Record<string, string | string[] | undefined>): Record<string, string> => {
  const out = new Map<string, string>();
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) out.set(k, Array.isArray(v) ? v.join(", ") : v);
  return Object.fromEntries(out);
};

export const send = async (ctx: NodeContext, p: Prepared): Promise<NodeOutcome> => {
  const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(p.timeoutMs)]);
  let res: Awaited<ReturnType<typeof request>>;
  try {
    res = await request(p.url, { method: p.method as "GET", headers: p.headers, body: p.body, signal, dispatcher: ctx.egress });
  } catch (err) {
    // A destination the egress policy refuses: final, no retry (the same address would be refused again).
    if (err instanceof EgressRefusedError) return { kind: "failed", error: `config.url: ${err.message}; nothing was sent`, final: true };
    const why =
      signal.aborted && !ctx.signal.aborted ? `timed out after ${p.timeoutMs} ms` : err instanceof Error ? err.message : String(err);
    throw new Error(`${p.method} ${new URL(p.url).host}: ${why}`);
  }
  const raw = await readCapped(res.body, RESPONSE_LIMIT);
  if (!raw) {
    res.body.destroy();
    return { kind: "failed", error: `${p.method} ${new URL(p.url).host}: the response is over ${RESPONSE_LIMIT} bytes` };
  }
  const headers = flatHeaders(res.headers);
  const output = { status: res.statusCode, headers, body: parseBody(raw, headers["content-type"]) };
  if (res.statusCode >= 200 && res.statusCode < 300) return { kind: "succeeded", output };
  return { kind: "failed", error: `${p.method} ${new URL(p.url).host} answered HTTP ${res.statusCode}`, output };
};

export const httpExecutor: NodeExecutor = {
  type: "http",
  start: async (ctx) => send(ctx, await prepare(ctx)),
};
