/**
 * A `fetch` for the OAuth client that knows whether a request reached the far side. Renewal needs
 * the difference (SECURITY.md "Connected accounts"): a refresh that failed before anything was
 * sent may be retried; one whose connection dropped after it was sent has an unknown outcome, and
 * with a provider that rotates refresh tokens the old token must never be sent again. Built on
 * node:http(s) rather than the global fetch, whose errors do not say which side of sending they
 * happened on.
 */
import http from "node:http";
import https from "node:https";

/** Thrown for a request that got no answer; `sent` says whether any of it may have reached the provider. */
export class NoAnswerError extends Error {
  override readonly name = "NoAnswerError";
  constructor(
    message: string,
    readonly sent: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Longest a provider may take to answer one request. */
export const PROVIDER_TIMEOUT_MS = 15_000;
/** Largest answer read from a provider. */
const MAX_BODY_BYTES = 1 << 20;

const bodyText = async (body: RequestInit["body"]): Promise<string | undefined> => {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return body;
  if (body instanceof URLSearchParams) return body.toString();
  return new Response(body).text();
};

const headersOf = (h: RequestInit["headers"]): Record<string, string> => Object.fromEntries(new Headers(h).entries());

/**
 * `fetch(url, init)` over node:http(s). Connection refused, DNS failures and the like fail with
 * `sent: false`; a socket that closed, reset or timed out once connected fails with `sent: true`.
 */
export const sendingFetch = async (
  input: string | URL | Request,
  init: RequestInit = {},
  timeoutMs = PROVIDER_TIMEOUT_MS,
): Promise<Response> => {
  const url = new URL(input instanceof Request ? input.url : input);
  const payload = await bodyText(init.body);
  const lib = url.protocol === "https:" ? https : http;
  return new Promise<Response>((resolve, reject) => {
    let sent = false;
    const fail = (why: string, cause?: unknown) => reject(new NoAnswerError(`${url.origin}${url.pathname}: ${why}`, sent, { cause }));
    const req = lib.request(url, { method: init.method ?? "GET", headers: headersOf(init.headers), timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY_BYTES) req.destroy(new Error("answer over 1 MiB"));
        else chunks.push(c);
      });
      res.on("end", () => {
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === "string") headers.set(k, v);
        const status = res.statusCode ?? 500;
        const body = status === 204 || status === 304 ? null : Buffer.concat(chunks);
        resolve(new Response(body, { status, headers }));
      });
      res.on("error", (err) => fail("the answer was cut off", err));
    });
    req.on("socket", (socket) => {
      // Once connected, bytes may have left: from here on the outcome is unknown.
      if (!socket.connecting) sent = true;
      else socket.once("connect", () => (sent = true));
    });
    req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on("error", (err) => fail(sent ? `no answer (${err.message})` : `not sent (${err.message})`, err));
    init.signal?.addEventListener("abort", () => req.destroy(new Error("aborted")), { once: true });
    req.end(payload);
  });
};
