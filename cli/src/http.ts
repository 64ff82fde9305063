/**
 * The user CLI's HTTP client for `/api/v1`: bearer token, JSON in and out, and every failure turned
 * into the FlowError the user should see (the server's own error body when it sent one).
 *
 * Built on node:http (node:https only for an https:// URL), not undici: importing undici cost a
 * user command about 170 ms of its start-up, node:http a few ms, and one request per command needs
 * nothing more (README, "How fast the CLI starts"). A client's first call to an http:// URL goes
 * out on its own connection through http1.ts (node:net, the request written by hand, the answer
 * read whole): most commands make one request, and it then leaves before node:http is loaded.
 */
import type * as Http from "node:http";
import type { Agent, ClientRequest, IncomingMessage } from "node:http";
import { ERROR_CODES, FlowError, errorFromBody } from "@flowsvc/core/errors";
import type { ErrorCode } from "@flowsvc/core/errors";
import { exchangeOnce, isPlainRequest, openStream } from "./http1.js";
import type { Http1Request, Http1Stream } from "./http1.js";

export type HttpMethod = "GET" | "POST" | "PUT" | "DELETE";

export interface ApiClient {
  readonly url: string;
  /** Sends JSON (when `body` is given) and answers the parsed JSON body; undefined for an empty answer. */
  call<T = unknown>(method: HttpMethod, path: string, body?: unknown): Promise<T>;
  /** GETs `path` and hands each chunk of the body to `sink` as it arrives; no timeout between chunks. */
  stream(path: string, sink: (chunk: Uint8Array) => Promise<void>): Promise<void>;
  /** Drops the connections; call it once the command is done. */
  close(): Promise<void>;
}

export interface ApiClientOptions {
  url: string;
  token: string;
}

const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "ECONNECT_TIMEOUT"]);

/** How long connecting may take before the server counts as unreachable. */
const CONNECT_TIMEOUT_MS = 10_000;

/** Query string from the defined values only: `withQuery("/runs", { limit: 5, tag: undefined })` is `/runs?limit=5`. */
export const withQuery = (path: string, params: Record<string, string | number | undefined>): string => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const text = q.toString();
  return text ? `${path}?${text}` : path;
};

export const loginHint = (url: string): string =>
  `run \`flow login --url ${url} --token <token>\` or set FLOWSVC_TOKEN (the token \`flow server\` printed at first start)`;

/** A network failure as the user should read it. */
export const networkError = (url: string, err: unknown): FlowError => {
  const code = (err as { code?: string } | undefined)?.code ?? "";
  if (UNREACHABLE.has(code)) {
    return new FlowError("unavailable", `cannot reach flowsvc at ${url}`, {
      hint: "start it with `npm start` (or `flow server`), or set --url / FLOWSVC_URL",
      cause: err,
    });
  }
  const reason = err instanceof Error ? err.message : String(err);
  return new FlowError("unavailable", `lost the connection to flowsvc at ${url} (${reason})`, {
    hint: "check that the server is still running, then retry",
    cause: err,
  });
};

/**
 * The JSON text of a request body. A value nested past JSON.stringify's recursion (a document or an
 * `--input` tens of thousands of levels deep) is refused as what it is, before anything is sent.
 */
const bodyText = (body: unknown): string | undefined => {
  if (body === undefined) return undefined;
  try {
    return JSON.stringify(body);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    throw new FlowError("invalid_argument", "the request body nests too deep to send as JSON (the server takes at most 128 levels)", {
      hint: "flatten the value; for a graph, `flow check <file>` names the place",
      cause: err,
    });
  }
};

/** Codes for answers that carry no flowsvc error body (a proxy, or a route this server lacks). */
const CODE_BY_STATUS: Readonly<Record<number, ErrorCode>> = {
  400: "invalid_argument",
  401: "unauthenticated",
  403: "forbidden",
  404: "not_found",
  409: "conflict",
  413: "payload_too_large",
  429: "limit_exceeded",
  502: "unavailable",
  503: "unavailable",
  504: "unavailable",
};

/** What to do, for a server error that came without a hint of its own. */
const FALLBACK_HINTS: Partial<Record<ErrorCode, string>> = {
  invalid_argument: "fix the value named above and retry",
  forbidden: "ask an admin of the project for the role this needs",
  payload_too_large: "send less: past a few hundred KB, pass a reference (an artifact, a URL) instead",
  limit_exceeded: "retry once the project's backlog drains",
  unavailable: "retry in a moment; if it persists, check the server's log",
  internal: "the server's log has the details",
};

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/** The request an answer came to: the server's URL, the method and the path (with its query). */
export interface AnsweredRequest {
  readonly url: string;
  readonly method: HttpMethod;
  readonly path: string;
}

/** An answer without a flowsvc error body: a 404 is a route this server lacks, anything else says its status. */
const bareAnswerError = (to: AnsweredRequest, status: number): FlowError => {
  const { url, method, path } = to;
  const code = CODE_BY_STATUS[status] ?? "internal";
  if (status === 404) {
    const hint = "this server may be older than this CLI: upgrade it, or check --url";
    return new FlowError(code, `flowsvc at ${url} has no route ${method} ${path.split("?")[0] ?? path}`, { hint });
  }
  return new FlowError(code, `flowsvc at ${url} answered HTTP ${status} to ${method} ${path}`, { hint: undefined });
};

/** The FlowError for a non-2xx answer. */
export const answerError = (to: AnsweredRequest, status: number, text: string): FlowError => {
  const body = parseJson(text);
  const code = (body as { error?: { code?: unknown } } | undefined)?.error?.code;
  const known = typeof code === "string" && code in ERROR_CODES;
  const err = (known ? errorFromBody(status, body) : undefined) ?? bareAnswerError(to, status);
  if (err.code === "unauthenticated")
    return new FlowError("unauthenticated", err.message, { hint: loginHint(to.url), details: err.details });
  if (!err.hint && FALLBACK_HINTS[err.code])
    return new FlowError(err.code, err.message, { hint: FALLBACK_HINTS[err.code], details: err.details });
  return err;
};

interface Transport {
  request: typeof Http.request;
  agent: Agent;
}

/** node:http or node:https with a keep-alive agent, loaded on first use. */
const loadTransport = async (url: string): Promise<Transport> => {
  const lib = url.startsWith("https:") ? await import("node:https") : await import("node:http");
  return { request: lib.request, agent: new lib.Agent({ keepAlive: true }) };
};

/** Fails the request when the socket has not connected within CONNECT_TIMEOUT_MS. */
const guardConnect = (req: ClientRequest): void => {
  req.once("socket", (socket) => {
    if (!socket.connecting) return;
    const timer = setTimeout(() => {
      req.destroy(Object.assign(new Error(`connect timeout after ${CONNECT_TIMEOUT_MS} ms`), { code: "ECONNECT_TIMEOUT" }));
    }, CONNECT_TIMEOUT_MS);
    socket.once("connect", () => clearTimeout(timer));
    socket.once("close", () => clearTimeout(timer));
  });
};

/** Reads a response body to its end as UTF-8 text. */
const readText = async (res: IncomingMessage): Promise<string> => {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
};

/**
 * The first call written by hand (http1.ts), when node:http would send it as written: an http:// URL
 * without credentials, query or fragment (node:http's reading of those stands), a path and header
 * values node:http accepts (it refuses the others, and so it should).
 */
const handRequest = (
  url: string,
  r: { method: HttpMethod; path: string; headers: Record<string, string>; payload: string | undefined },
): Http1Request | undefined => {
  if (!url.startsWith("http:") || !isPlainRequest(r.path, r.headers)) return undefined;
  const target = new URL(url);
  if (target.username || target.password || target.search || target.hash) return undefined;
  return {
    host: target.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: Number(target.port || 80),
    hostHeader: target.host,
    method: r.method,
    path: `${target.pathname.replace(/\/+$/, "")}${r.path}`,
    headers: r.headers,
    payload: r.payload,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
  };
};

/** An answer read whole: its status and its body as text. */
interface TextAnswer {
  status: number;
  text: string;
}

/** A node:http answer read whole; one that is not 2xx reads as much of its body as it can. */
const textOf = async (res: IncomingMessage): Promise<TextAnswer> => {
  const status = res.statusCode ?? 0;
  return { status, text: status >= 200 && status < 300 ? await readText(res) : await readText(res).catch(() => "") };
};

/** A streamed body: its pieces, and how to drop it when the consumer fails. */
interface OpenBody {
  chunks: AsyncIterator<unknown>;
  destroy: () => void;
}

const wholeText = async (pieces: AsyncIterable<Buffer>): Promise<string> => {
  const parts: Buffer[] = [];
  for await (const piece of pieces) parts.push(piece);
  return Buffer.concat(parts).toString("utf8");
};

/** Hands each piece of `body` to `sink` as it arrives; a network failure becomes the user's error, a failed sink drops the body. */
const pump = async (url: string, body: OpenBody, sink: (chunk: Uint8Array) => Promise<void>): Promise<void> => {
  for (;;) {
    let next: IteratorResult<unknown>;
    try {
      next = await body.chunks.next();
    } catch (err) {
      throw networkError(url, err);
    }
    if (next.done) return;
    try {
      await sink(next.value as Uint8Array);
    } catch (err) {
      body.destroy();
      throw err;
    }
  }
};

const requestHeaders = (token: string, payload: string | undefined): Record<string, string> => ({
  accept: "application/json, text/plain",
  ...(token ? { authorization: `Bearer ${token}` } : {}),
  ...(payload === undefined ? {} : { "content-type": "application/json", "content-length": String(Buffer.byteLength(payload)) }),
});

export const createApiClient = (options: ApiClientOptions): ApiClient => {
  const url = options.url.replace(/\/+$/, "");
  let transport: Promise<Transport> | undefined;
  let firstCall = true;
  const headers = (payload: string | undefined): Record<string, string> => requestHeaders(options.token, payload);

  const exchange = async (method: HttpMethod, path: string, payload: string | undefined): Promise<IncomingMessage> => {
    const { request, agent } = await (transport ??= loadTransport(url));
    return new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(`${url}${path}`, { method, agent, headers: headers(payload) });
      guardConnect(req);
      req.once("response", resolve);
      req.once("error", reject);
      req.end(payload);
    });
  };

  const send = async (method: HttpMethod, path: string, payload: string | undefined): Promise<IncomingMessage> => {
    let res: IncomingMessage;
    try {
      res = await exchange(method, path, payload);
    } catch (err) {
      throw networkError(url, err);
    }
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) return res;
    const text = await readText(res).catch(() => "");
    throw answerError({ url, method, path }, status, text);
  };

  /** The first call to an http:// URL goes by hand (handRequest); every other through node:http. */
  const firstByHand = (method: HttpMethod, path: string, payload: string | undefined): Promise<TextAnswer> | undefined => {
    const first = firstCall;
    firstCall = false;
    const req = first ? handRequest(url, { method, path, headers: headers(payload), payload }) : undefined;
    return req && exchangeOnce(req).then(({ status, body }) => ({ status, text: body.toString("utf8") }));
  };

  /** A streamed GET's body: the first call by hand (http1.ts's openStream), else through node:http. */
  const openBody = async (path: string): Promise<OpenBody> => {
    const first = firstCall;
    firstCall = false;
    const req = first ? handRequest(url, { method: "GET", path, headers: headers(undefined), payload: undefined }) : undefined;
    if (!req) {
      const res = await send("GET", path, undefined);
      return { chunks: res[Symbol.asyncIterator](), destroy: () => res.destroy() };
    }
    let opened: Http1Stream;
    try {
      opened = await openStream(req);
    } catch (err) {
      throw networkError(url, err);
    }
    if (opened.status >= 200 && opened.status < 300) return { chunks: opened.body, destroy: () => opened.close() };
    const text = await wholeText(opened.body).catch(() => "");
    throw answerError({ url, method: "GET", path }, opened.status, text);
  };

  /** One exchange read whole. */
  const exchangeText = async (method: HttpMethod, path: string, payload: string | undefined): Promise<TextAnswer> => {
    const byHand = firstByHand(method, path, payload);
    if (byHand) return byHand;
    return textOf(await exchange(method, path, payload));
  };

  return {
    url,
    call: async <T>(method: HttpMethod, path: string, body?: unknown): Promise<T> => {
      let answer: TextAnswer;
      const payload = bodyText(body);
      try {
        answer = await exchangeText(method, path, payload);
      } catch (err) {
        throw networkError(url, err);
      }
      if (answer.status < 200 || answer.status >= 300) throw answerError({ url, method, path }, answer.status, answer.text);
      const { text } = answer;
      if (text.trim() === "") return undefined as T;
      const parsed = parseJson(text);
      if (parsed === undefined)
        throw new FlowError("internal", `flowsvc at ${url} answered ${method} ${path} with a body that is not JSON`);
      return parsed as T;
    },
    stream: async (path, sink) => pump(url, await openBody(path), sink),
    // destroy, not a graceful end: a stream a failed sink left open must not hold the process.
    close: async () => {
      if (transport) (await transport).agent.destroy();
    },
  };
};
