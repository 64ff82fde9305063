/**
 * The one error type of flowsvc. `code` comes from ERROR_CODES; the HTTP status and the CLI
 * exit status are derived from the code here and nowhere else. The table is documented in the
 * README's "Error codes" section: change both together.
 */
export const ERROR_CODES = {
  invalid_argument: { http: 400, exit: 2, summary: "the request or a flag is malformed; the message names the field" },
  unauthenticated: { http: 401, exit: 1, summary: "no token, or a token the server does not know" },
  forbidden: { http: 403, exit: 1, summary: "the token's user lacks the role this needs" },
  not_found: { http: 404, exit: 1, summary: "no such org, project, run, secret or route" },
  conflict: { http: 409, exit: 1, summary: "the resource changed or is in a state that forbids this" },
  job_lost: { http: 409, exit: 1, summary: "an agent's job lease was taken over (the job was dispatched again)" },
  payload_too_large: { http: 413, exit: 1, summary: "a body or value is over its limit" },
  uri_too_long: { http: 414, exit: 1, summary: "a path segment is over the router's limit" },
  request_timeout: { http: 408, exit: 1, summary: "the request's headers or body arrived too slowly" },
  headers_too_large: { http: 431, exit: 1, summary: "the request line and headers together are over the HTTP server's limit" },
  determinism: { http: 422, exit: 1, summary: "replay reached a different durable call than the one recorded" },
  step_output_too_large: { http: 413, exit: 1, summary: "a step's stdout is over 2 MiB" },
  no_agent_socket: { http: 400, exit: 1, summary: "an in-script call ran outside a script (FLOW_AGENT_SOCKET is not set)" },
  limit_exceeded: { http: 429, exit: 1, summary: "a per-project limit is reached; retry when it drains" },
  emit_refused: {
    http: 409,
    exit: 1,
    summary: "an in-script emit was refused by a bus limit (chain depth, handler backlog); nothing was recorded",
  },
  unavailable: { http: 503, exit: 1, summary: "the server or database cannot be reached" },
  config: { http: 500, exit: 2, summary: "the service configuration is invalid" },
  internal: { http: 500, exit: 1, summary: "a bug: the server log has the details" },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface FlowErrorOptions {
  /** What the user can do about it, printed on its own line by the CLI. */
  hint?: string;
  cause?: unknown;
  /** Machine-readable details (field paths, limits) returned in the HTTP error body. */
  details?: Record<string, unknown>;
}

/** Marks FlowError's prototype: see FlowError[Symbol.hasInstance]. Symbol.for, so every copy of this module agrees on it. */
const FLOW_ERROR_BRAND = Symbol.for("flowsvc.FlowError");

export class FlowError extends Error {
  /**
   * `err instanceof FlowError` holds for a FlowError made by any copy of this module: the user CLI's
   * bundle carries its own copy of core's errors (scripts/bundle-cli.mjs), while the server, the
   * local engine and core's zod modules it loads at run time throw core's dist copy. A subclass
   * (`instanceof StepFailed`) keeps the ordinary prototype check.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (this !== FlowError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === "object" && value !== null && (value as { [FLOW_ERROR_BRAND]?: unknown })[FLOW_ERROR_BRAND] === true;
  }

  override readonly name = "FlowError";
  readonly code: ErrorCode;
  readonly hint: string | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: FlowErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.hint = options.hint;
    this.details = options.details;
  }

  toJSON(): ErrorBody {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.hint ? { hint: this.hint } : {}),
        ...(this.details ? { details: this.details } : {}),
      },
    };
  }
}

Object.defineProperty(FlowError.prototype, FLOW_ERROR_BRAND, { value: true });

export interface ErrorBody {
  error: { code: string; message: string; hint?: string; details?: Record<string, unknown> };
}

export const httpStatusOf = (code: string): number => (ERROR_CODES as Record<string, { http: number }>)[code]?.http ?? 500;
export const exitStatusOf = (code: string): number => (ERROR_CODES as Record<string, { exit: number }>)[code]?.exit ?? 1;

/** Rebuilds a FlowError from an HTTP error body, so a client rethrows what the server threw. */
export const errorFromBody = (status: number, body: unknown): FlowError => {
  const e = (body as Partial<ErrorBody> | undefined)?.error;
  if (e && typeof e.code === "string" && e.code in ERROR_CODES) {
    return new FlowError(e.code as ErrorCode, e.message, { hint: e.hint, details: e.details });
  }
  return new FlowError(status === 401 ? "unauthenticated" : "internal", `server answered HTTP ${status}`);
};

/**
 * A refused document's problem as one line: `nodes[3].config.url: required`, or, where the YAML node
 * is known, `line 3, column 5: jobs.build.needs[0]: no job is named "x"` (`flow check`, the CLI's
 * error lines, the refusals' messages).
 */
export const problemLine = (p: { path: string; message: string; line?: number | undefined; column?: number | undefined }): string =>
  p.line !== undefined && p.column !== undefined
    ? `line ${p.line}, column ${p.column}: ${p.path}: ${p.message}`
    : `${p.path}: ${p.message}`;

/** Formats zod issues as one readable line each: `field.path: what was wrong`. */
export const describeIssues = (issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>): string =>
  issues.map((i) => `${i.path.length ? i.path.map(String).join(".") : "(body)"}: ${i.message}`).join("; ");
