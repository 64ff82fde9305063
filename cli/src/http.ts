/**
 * The user CLI's HTTP client for `/api/v1`: bearer token, JSON in and out, and every failure turned
 * into the FlowError the user should see (the server's own error body when it sent one).
 */
import { Agent, request } from "undici";
import type { Dispatcher } from "undici";
import { ERROR_CODES, FlowError, errorFromBody } from "@flowsvc/core";
import type { ErrorCode } from "@flowsvc/core";

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

const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT"]);

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

export const createApiClient = (options: ApiClientOptions): ApiClient => {
  const url = options.url.replace(/\/+$/, "");
  const dispatcher = new Agent({ connect: { timeout: 10_000 } });
  const headers = (json: boolean): Record<string, string> => ({
    accept: "application/json, text/plain",
    ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
    ...(json ? { "content-type": "application/json" } : {}),
  });

  const send = async (method: HttpMethod, path: string, body: unknown, bodyTimeout?: number): Promise<Dispatcher.ResponseData> => {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(`${url}${path}`, {
        method,
        dispatcher,
        headers: headers(body !== undefined),
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(bodyTimeout === undefined ? {} : { bodyTimeout }),
      });
    } catch (err) {
      throw networkError(url, err);
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return res;
    const text = await res.body.text().catch(() => "");
    throw answerError({ url, method, path }, res.statusCode, text);
  };

  return {
    url,
    call: async <T>(method: HttpMethod, path: string, body?: unknown): Promise<T> => {
      const res = await send(method, path, body);
      let text: string;
      try {
        text = await res.body.text();
      } catch (err) {
        throw networkError(url, err);
      }
      if (text.trim() === "") return undefined as T;
      const parsed = parseJson(text);
      if (parsed === undefined)
        throw new FlowError("internal", `flowsvc at ${url} answered ${method} ${path} with a body that is not JSON`);
      return parsed as T;
    },
    stream: async (path, sink) => {
      const res = await send("GET", path, undefined, 0);
      const chunks = res.body[Symbol.asyncIterator]();
      for (;;) {
        let next: IteratorResult<unknown>;
        try {
          next = await chunks.next();
        } catch (err) {
          throw networkError(url, err);
        }
        if (next.done) return;
        try {
          await sink(next.value as Uint8Array);
        } catch (err) {
          res.body.destroy();
          throw err;
        }
      }
    },
    // destroy, not close: close waits for a stream a failed sink left open.
    close: () => dispatcher.destroy(),
  };
};
