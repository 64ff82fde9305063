/**
 * Connector nodes (`slack.post_message`, `anthropic.messages`, `github.report_run_status`: every
 * type core's connectorManifest knows). The manifest builds the request from the node's evaluated
 * config; the credential the config names is resolved through the engine (core's one resolver) and
 * becomes auth by the kind it was stored as (render.ts: an explicit config header wins over it).
 * The kind is not narrowed to the manifest's: spec Credential rule 4, a connector sent a credential
 * of another kind sends it as that kind and the far side refuses (the submit-time check and the
 * requirements report already name the mismatch).
 *
 * Output `{status, headers, body}` (body parsed as JSON when it is JSON), so the model's reply reads
 * at `nodes.<id>.output.body.content[0].text`. A non-2xx answer fails the node (its retry policy
 * applies), and so does a 2xx whose manifest `okField` is not true (Slack's `ok: false`), with the
 * far side's error in the message. Nothing is sent when the config or the credential is refused.
 */
import { request } from "undici";
import { connectorManifest, FlowError, renderHttpAuth, type ConnectorManifest, type ConnectorRequest } from "@flowsvc/core";
import type { NodeContext, NodeExecutor, NodeOutcome } from "./types.js";

/** Largest answer body kept as output: a node's output is stored like a step's (2 MiB). */
export const CONNECTOR_RESPONSE_MAX = 2 * 1024 * 1024;
/** How long a connector call may take: a model call can think for minutes. */
const HEADERS_TIMEOUT_MS = 300_000;
const BODY_TIMEOUT_MS = 300_000;

let baseUrls: Readonly<Record<string, string>> = {};

/**
 * The base URL overrides of the server's configuration (core's parseConnectorBaseUrls, from
 * FLOWSVC_CONNECTOR_BASE_URLS), set once at start-up by the deployable that runs the graph engine.
 */
export const setConnectorBaseUrls = (urls: Readonly<Record<string, string>>): void => {
  baseUrls = { ...urls };
};

export interface ConnectorOutput {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** The request with the named credential's auth; a config without `credential` goes without (when the manifest allows). */
const authorized = async (ctx: NodeContext, manifest: ConnectorManifest, req: ConnectorRequest): Promise<ConnectorRequest> => {
  const name = (ctx.config as { credential?: unknown }).credential;
  if (name === undefined) return req;
  if (typeof name !== "string") throw new FlowError("invalid_argument", `${manifest.type}: config.credential: must be a credential name`);
  const cred = await ctx.credential(name);
  const auth = renderHttpAuth(name, cred.value, { url: req.url, headers: req.headers });
  return { ...req, url: auth.url, headers: { ...auth.headers } };
};

const readCapped = async (body: AsyncIterable<Buffer>): Promise<string> => {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > CONNECTOR_RESPONSE_MAX)
      throw new FlowError("payload_too_large", `the answer is over ${CONNECTOR_RESPONSE_MAX} bytes, the most a node's output may hold`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
};

const headersOf = (raw: Record<string, string | string[] | undefined>): Record<string, string> =>
  Object.fromEntries(
    Object.entries(raw)
      .filter(([k, v]) => v !== undefined && k !== "set-cookie")
      .map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : (v as string)]),
  );

const parsedBody = (text: string, contentType: string | undefined): unknown => {
  if (!/\bjson\b/i.test(contentType ?? "")) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
};

const send = async (ctx: NodeContext, req: ConnectorRequest): Promise<ConnectorOutput> => {
  const res = await request(req.url, {
    method: req.method as "POST",
    headers: req.headers,
    body: req.body === undefined ? undefined : JSON.stringify(req.body),
    signal: ctx.signal,
    headersTimeout: HEADERS_TIMEOUT_MS,
    bodyTimeout: BODY_TIMEOUT_MS,
  });
  const headers = headersOf(res.headers);
  const text = await readCapped(res.body);
  return { status: res.statusCode, headers, body: parsedBody(text, headers["content-type"]) };
};

/** The far side's own words for an error, from the shapes the shipped APIs answer. */
const farSideError = (body: unknown): string => {
  if (typeof body === "string") return body.slice(0, 500);
  const b = body as { error?: unknown; message?: unknown } | null;
  const e = b?.error;
  if (typeof e === "string") return e;
  if (typeof e === "object" && e !== null) {
    const { type, message } = e as { type?: unknown; message?: unknown };
    return [type, message].filter((x) => typeof x === "string").join(": ");
  }
  return typeof b?.message === "string" ? b.message : "";
};

/** The outcome of an answer: 2xx (and the manifest's ok field true) succeeds; anything else fails with the far side's reason. */
const outcomeOf = (manifest: ConnectorManifest, out: ConnectorOutput): NodeOutcome => {
  const why = farSideError(out.body);
  if (out.status < 200 || out.status > 299)
    return { kind: "failed", error: `${manifest.type}: the far side answered HTTP ${out.status}${why ? ` (${why})` : ""}`, output: out };
  const field = manifest.okField;
  if (field !== undefined && (out.body as Record<string, unknown> | null)?.[field] !== true)
    return { kind: "failed", error: `${manifest.type}: the far side answered ${field}: false${why ? ` (${why})` : ""}`, output: out };
  return { kind: "succeeded", output: out };
};

export const connectorExecutor: NodeExecutor = {
  type: (type: string) => connectorManifest(type) !== undefined,
  async start(ctx: NodeContext): Promise<NodeOutcome> {
    const manifest = connectorManifest(ctx.node.type);
    if (manifest === undefined) return { kind: "failed", error: `no connector has type ${JSON.stringify(ctx.node.type)}` };
    let req: ConnectorRequest;
    try {
      req = await authorized(ctx, manifest, manifest.request(ctx.config, { baseUrls }));
    } catch (e) {
      return { kind: "failed", error: `${messageOf(e)}: nothing was sent` };
    }
    try {
      return outcomeOf(manifest, await send(ctx, req));
    } catch (e) {
      return { kind: "failed", error: `${manifest.type}: ${messageOf(e)}` };
    }
  },
};
