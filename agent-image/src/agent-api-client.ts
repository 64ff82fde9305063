/**
 * The agent's only way to the control plane: the agent API over HTTP (docs/internals.md, "Agent
 * API"), bearer the job token; the AgentBackend main.ts builds. Answers are validated with core's
 * schemas. Network errors, 5xx and 429 are retried with backoff (forever for the durable calls);
 * 401 and 409 `job_lost` mean the lease is gone: `onJobLost` fires once, every retry loop and
 * request in flight ends, and each call fails with FlowError("job_lost"). `close()` does the same
 * for a job the agent is done with (or must stop at once).
 */
import { Agent } from "undici";
import type { Dispatcher } from "undici";
import { z } from "zod";
import {
  AnyClaimSchema,
  CallResponseSchema,
  FlowError,
  JournalEntrySchema,
  StateResponseSchema,
  SuspendResponseSchema,
  REQUEST_ID_HEADER,
  describeIssues,
  errorFromBody,
  saneRequestId,
} from "@flowsvc/core";
import type {
  CallRequest,
  CallResponse,
  ClaimRequest,
  FinishRequest,
  JournalEntry,
  LogChunk,
  RecordRequest,
  StateRequest,
} from "@flowsvc/core";
import type { ActivityFinish, AgentBackend, AnyClaim, StateAnswer } from "./backend.js";
import type { Logger } from "./logger.js";
import { withRetry } from "./retry.js";

/** A failure worth another attempt: the server could not be reached or answered 5xx/429/408. */
export class TransientApiError extends Error {
  override readonly name = "TransientApiError";
  constructor(
    message: string,
    readonly status: number | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export const isTransient = (err: unknown): boolean => err instanceof TransientApiError;

export interface AgentApiClientOptions {
  readonly serverUrl: string;
  readonly token: string;
  readonly logger: Logger;
  /** Aborting stops every retry loop and in-flight request (job lost, agent stopping). */
  readonly signal?: AbortSignal;
  /** Fired once, the first time the server says this job's lease is gone. */
  readonly onJobLost?: (err: FlowError) => void;
  /** How long `claim` keeps retrying an unreachable server (default 60 s). */
  readonly claimRetryMs?: number;
  readonly minDelayMs?: number;
  readonly maxDelayMs?: number;
  readonly requestTimeoutMs?: number;
  /**
   * The connection pool to use (a worker agent's one pool for all its jobs: one keep-alive
   * connection instead of a TCP connect and a server accept per job). A given pool is the
   * caller's: close() ends this client's calls, not the pool. Unset: the client makes its own.
   */
  readonly dispatcher?: Dispatcher;
}

/** A pool of connections to the server, as one client makes for itself (a worker shares one across its jobs). */
export const newAgentApiDispatcher = (requestTimeoutMs = 30_000): Dispatcher =>
  new Agent({ keepAliveTimeout: 4_000, connect: { timeout: 10_000 }, headersTimeout: requestTimeoutMs, bodyTimeout: requestTimeoutMs });

const HeartbeatResponseSchema = z.object({ lease_ms: z.number().int().positive().optional() });
const RecordResponseSchema = z.object({ entry: JournalEntrySchema });
const FinishResponseSchema = z.object({ status: z.string().optional() });
const AnySchema = z.unknown();

type Retry = "never" | "forever" | { readonly giveUpAfterMs: number };

export class AgentApiClient implements AgentBackend {
  readonly #options: AgentApiClientOptions;
  readonly #dispatcher: Dispatcher;
  /** Whether #dispatcher is this client's own (closed with it) or the caller's. */
  readonly #ownDispatcher: boolean;
  /** Aborted on a lost lease or close(); with options.signal, ends every retry loop and request. */
  readonly #abort = new AbortController();
  readonly #signal: AbortSignal;
  #lost = false;
  /** The claim's request id, sent as X-Request-Id on the job's later calls (core/src/request-id.ts). */
  #requestId: string | undefined;
  #closed: Promise<void> | undefined;
  readonly #targets = new Map<string, { origin: string; path: string }>();

  constructor(options: AgentApiClientOptions) {
    this.#options = options;
    this.#signal = options.signal ? AbortSignal.any([options.signal, this.#abort.signal]) : this.#abort.signal;
    this.#ownDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? newAgentApiDispatcher(options.requestTimeoutMs);
  }

  /** The job (a script or an activity child); `kind` defaults to "script" for older servers. */
  async claim(body: ClaimRequest): Promise<AnyClaim> {
    const claim = await this.#post("claim", body, AnyClaimSchema, { giveUpAfterMs: this.#options.claimRetryMs ?? 60_000 });
    this.#requestId = saneRequestId(claim.request_id);
    return claim;
  }

  /** One attempt; the heartbeat loop decides what a failure means. Answers the new lease. */
  async heartbeat(): Promise<number | undefined> {
    return (await this.#post("heartbeat", {}, HeartbeatResponseSchema, "never")).lease_ms;
  }

  /** Records a durable call; retried until the server confirms it. Answers the stored entry. */
  async record(body: RecordRequest): Promise<JournalEntry> {
    return (await this.#post("journal", body, RecordResponseSchema, "forever")).entry;
  }

  /** A durable call that may park the run; retried until the server answers it (idempotent by position). */
  call(body: CallRequest): Promise<CallResponse> {
    return this.#post("call", body, CallResponseSchema, "forever");
  }

  /** Parks (or requeues) the run after a `pending` call; the job ends with it. */
  async suspend(): Promise<"parked" | "requeued"> {
    return (await this.#post("suspend", {}, SuspendResponseSchema, "forever")).status;
  }

  /** `flow state`: not durable, but retried like the rest (the script waits for its answer). */
  async state(body: StateRequest): Promise<StateAnswer> {
    const answer = await this.#post("state", body, StateResponseSchema, "forever");
    return {
      ...(answer.value !== undefined ? { value: answer.value } : {}),
      ...(answer.found !== undefined ? { found: answer.found } : {}),
      ...(answer.items !== undefined ? { items: answer.items.map((i) => ({ key: i.key, value: i.value })) } : {}),
    };
  }

  async log(chunks: readonly LogChunk[]): Promise<void> {
    await this.#post("log", { chunks }, AnySchema, "forever");
  }

  async annotate(markdown: string): Promise<void> {
    await this.#post("annotate", { markdown }, AnySchema, "forever");
  }

  async finish(body: FinishRequest): Promise<string | undefined> {
    return (await this.#post("finish", body, FinishResponseSchema, "forever")).status;
  }

  /** An activity child's end (POST /agent/v1/finish-activity): its exit code and stdout. */
  async finishActivity(body: ActivityFinish): Promise<string | undefined> {
    return (await this.#post("finish-activity", body, FinishResponseSchema, "forever")).status;
  }

  /** Ends every call in flight (they fail with the abort's reason) and the connection pool if it is this client's own. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      if (!this.#abort.signal.aborted) this.#abort.abort(new FlowError("unavailable", "the agent API client is closed"));
      if (this.#ownDispatcher) await this.#dispatcher.destroy();
    })();
    return this.#closed;
  }

  async #post<S extends z.ZodType>(route: string, body: unknown, schema: S, retry: Retry): Promise<z.infer<S>> {
    const attempt = () => this.#attempt(route, body, schema);
    if (retry === "never") return attempt();
    return withRetry(attempt, {
      isRetryable: isTransient,
      signal: this.#signal,
      giveUpAfterMs: retry === "forever" ? undefined : retry.giveUpAfterMs,
      minDelayMs: this.#options.minDelayMs,
      maxDelayMs: this.#options.maxDelayMs,
      onRetry: (err, attempt, delayMs) => {
        if (attempt === 1 || attempt % 10 === 0)
          this.#options.logger.warn({ route, attempt, delayMs, err }, "agent API call failed; retrying");
      },
    });
  }

  async #attempt<S extends z.ZodType>(route: string, body: unknown, schema: S): Promise<z.infer<S>> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.#options.token}`, "content-type": "application/json" };
    if (this.#requestId !== undefined) headers[REQUEST_ID_HEADER] = this.#requestId;
    const { origin, path } = this.#target(route);
    const res = await exchange(this.#dispatcher, { origin, path, headers, body: JSON.stringify(body), signal: this.#signal }).catch(
      (err: unknown) => {
        if (this.#signal.aborted) throw this.#signal.reason;
        const cut = err instanceof CutAnswer;
        const cause = cut ? err.cause : err;
        throw cut
          ? new TransientApiError(`the server's answer to ${route} was cut: ${(cause as Error).message}`, err.status, { cause })
          : new TransientApiError(`cannot reach the server for ${route}: ${(cause as Error).message}`, undefined, { cause });
      },
    );
    const json = parseJson(res.text);
    if (res.status >= 400) throw this.#failure(route, res.status, json);
    const parsed = schema.safeParse(json ?? {});
    if (!parsed.success) {
      throw new FlowError("internal", `the server's answer to ${route} is malformed: ${describeIssues(parsed.error.issues)}`);
    }
    return parsed.data;
  }

  /** Where a route's requests go: the server URL's origin and the route's path under it (one URL parse per route). */
  #target(route: string): { origin: string; path: string } {
    let target = this.#targets.get(route);
    if (!target) {
      const url = new URL(`${this.#options.serverUrl}/agent/v1/${route}`);
      target = { origin: url.origin, path: `${url.pathname}${url.search}` };
      this.#targets.set(route, target);
    }
    return target;
  }

  #failure(route: string, status: number, json: unknown): Error {
    if (status >= 500 || status === 429 || status === 408) {
      const detail = errorFromBody(status, json).message;
      return new TransientApiError(`the server answered ${route} with HTTP ${status}: ${detail}`, status);
    }
    const err = errorFromBody(status, json);
    if (status === 401 || err.code === "job_lost") {
      const lost = new FlowError("job_lost", `the job's lease is gone (HTTP ${status} on ${route}): ${err.message}`, { cause: err });
      if (!this.#lost) {
        this.#lost = true;
        this.#abort.abort(lost);
        this.#options.onJobLost?.(lost);
      }
      return lost;
    }
    return err;
  }
}

/** An answer whose status line came but whose body did not arrive whole. */
class CutAnswer extends Error {
  constructor(
    readonly status: number,
    cause: unknown,
  ) {
    super("the answer was cut", { cause });
  }
}

interface Exchange {
  readonly origin: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly signal: AbortSignal;
}

/**
 * One POST and its whole answer as text, on undici's dispatch API: the body's chunks are
 * collected as they come, with no stream object per answer (undici's request() wraps every answer
 * in a Readable and reads it through its body mixin; on the agent's busy path, a `flow step`, that
 * was a tenth of the agent's own CPU). Rejects with the network error, or with CutAnswer when the
 * body broke off after the status line; `signal` aborts the request in flight with its reason.
 */
const exchange = (dispatcher: Dispatcher, x: Exchange): Promise<{ status: number; text: string }> =>
  new Promise((resolve, reject) => {
    x.signal.throwIfAborted();
    let status = 0;
    const chunks: Buffer[] = [];
    let controller: Dispatcher.DispatchController | undefined;
    const onAbort = (): void => controller?.abort(x.signal.reason as Error);
    x.signal.addEventListener("abort", onAbort, { once: true });
    const settle = (): void => x.signal.removeEventListener("abort", onAbort);
    dispatcher.dispatch(
      { origin: x.origin, path: x.path, method: "POST", headers: x.headers, body: x.body },
      {
        onRequestStart: (c) => {
          controller = c;
          if (x.signal.aborted) c.abort(x.signal.reason as Error);
        },
        onResponseStart: (_c, statusCode) => {
          status = statusCode;
        },
        onResponseData: (_c, chunk) => {
          chunks.push(chunk);
        },
        onResponseEnd: () => {
          settle();
          resolve({ status, text: chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8") });
        },
        onResponseError: (_c, err) => {
          settle();
          reject(status === 0 ? err : new CutAnswer(status, err));
        },
      },
    );
  });

const parseJson = (text: string): unknown => {
  if (text === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
};
