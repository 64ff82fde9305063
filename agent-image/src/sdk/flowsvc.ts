/**
 * flowsvc SDK for TypeScript and JavaScript scripts run by flowsvc: durable steps, sleeps, signal
 * waits, events, calls of child graph runs and state, over the agent's Unix socket (FLOW_AGENT_SOCKET, socket protocol v2:
 * one JSON line each way; docs/internals.md). Node built-ins only.
 *
 *   import { step, stepFn, sleep, waitSignal, state } from "./flowsvc.js";
 *   const version = (await step("version", ["git", "rev-parse", "HEAD"])).trim();
 *   await sleep("5m");
 *   const answer = await waitSignal("approve", { timeout: "1h" }); // null when it timed out
 *
 * Every durable call is recorded by position: when the run is replayed (after a sleep, a wait, an
 * agent restart) each call returns its recorded result instead of running again, so a script must
 * make the same durable calls in the same order on every pass. When the run must park, the agent
 * does not answer: it ends the script's process group. The SDK simply waits on the socket.
 */
import { spawn } from "node:child_process";
import type { ChildProcessByStdio } from "node:child_process";
import { createConnection } from "node:net";
import type { Socket } from "node:net";
import { constants } from "node:os";
import type { Readable } from "node:stream";

/** The live environment: a variable the script sets or deletes later is seen by the next call. */
const liveEnv = (): Record<string, string | undefined> => process.env;

/** The socket protocol version this SDK speaks. */
export const PROTOCOL_VERSION = 2;
/** The most stdout a step record keeps (2 MiB); past that the step is recorded as failed. */
export const STEP_OUTPUT_LIMIT = 2 * 1024 * 1024;

/** Humantime text ("5s", "1m", "2h", "30d") or a number of seconds. */
export type Duration = string | number;

/**
 * A call the agent refused (its `ok:false` answer), or one the SDK refused before sending.
 * `code` is a short machine-readable word ("invalid_argument", "determinism", "no_agent_socket");
 * `exit` is the exit status the agent asked the `flow` CLI to use, when it gave one.
 */
export class FlowError extends Error {
  override name = "FlowError";
  constructor(
    readonly code: string,
    message: string,
    readonly exit?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A step whose command exited non-zero (or a stepFn whose function threw), first pass or replayed. */
export class StepFailed extends FlowError {
  override name = "StepFailed";
  constructor(
    readonly exitCode: number,
    readonly stdout: string,
    message?: string,
    options?: { cause?: unknown },
  ) {
    super("step_failed", message ?? `step failed with exit code ${exitCode}`, exitCode, options);
  }
}

// ---- connection ---------------------------------------------------------------------------------

type Answer = Record<string, unknown>;

let nextId = 1;

/** One request line: {"v":2,"id":N,"op":op, ...fields}; undefined and null fields are left out. */
export const encodeRequest = (op: string, fields: Record<string, unknown>, id: number): string => {
  const body: Record<string, unknown> = { v: PROTOCOL_VERSION, id, op };
  for (const [key, value] of Object.entries(fields)) if (value !== undefined && value !== null) body[key] = value;
  return `${JSON.stringify(body)}\n`;
};

const socketPath = (): string => {
  const path = liveEnv()["FLOW_AGENT_SOCKET"];
  if (!path) throw new FlowError("no_agent_socket", "FLOW_AGENT_SOCKET is not set");
  return path;
};

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
const isInt = (x: unknown): x is number => typeof x === "number" && Number.isInteger(x);

/** One connection to the agent: a JSON line out, a JSON line back, as often as needed. */
class Connection {
  private chunks: Buffer[] = [];
  /** True when some chunk holds a newline: a whole line is waiting. */
  private newline = false;
  private ended = false;
  private failure: Error | undefined;
  private wake: (() => void) | undefined;
  private protocol = 0;

  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.chunks.push(chunk);
      if (chunk.includes(10)) this.newline = true;
      this.wake?.();
    });
    socket.on("end", () => {
      this.ended = true;
      this.wake?.();
    });
    socket.on("error", (err) => {
      this.failure = err;
      this.wake?.();
    });
  }

  static open(): Promise<Connection> {
    const path = socketPath();
    return new Promise((resolve, reject) => {
      const socket = createConnection({ path });
      const refused = (err: Error): void => {
        socket.destroy();
        reject(new FlowError("agent_unreachable", `cannot connect to the agent at ${path}: ${err.message}`));
      };
      socket.once("error", refused);
      socket.once("connect", () => {
        socket.off("error", refused);
        resolve(new Connection(socket));
      });
    });
  }

  /** Opens a connection, runs `use` with it, closes it. */
  static async with<T>(use: (c: Connection) => Promise<T>): Promise<T> {
    const connection = await Connection.open();
    try {
      return await use(connection);
    } finally {
      connection.socket.destroy();
    }
  }

  /** The agent's protocol version (asked once per connection). */
  async hello(): Promise<number> {
    if (this.protocol === 0) {
      const answer = await this.call("hello");
      this.protocol = isInt(answer["protocol"]) ? answer["protocol"] : isInt(answer["v"]) ? answer["v"] : 1;
    }
    return this.protocol;
  }

  /** Sends one request and answers its reply; `ok:false` throws FlowError. No time limit: a call that parks the run is never answered. */
  async call(op: string, fields: Record<string, unknown> = {}): Promise<Answer> {
    if (this.ended || this.failure) throw new FlowError("agent_closed", "the connection to the agent is closed");
    this.socket.write(encodeRequest(op, fields, nextId++));
    const answer = decodeAnswer(await this.readLine());
    if (answer["ok"] !== true) {
      const error = isObject(answer["error"]) ? answer["error"] : {};
      const code = typeof error["code"] === "string" && error["code"] ? error["code"] : "agent_error";
      const message = typeof error["message"] === "string" && error["message"] ? error["message"] : `the agent refused the ${op} call`;
      throw new FlowError(code, message, isInt(answer["exit"]) ? answer["exit"] : undefined);
    }
    return answer;
  }

  private async readLine(): Promise<Buffer> {
    while (!this.newline) {
      if (this.failure) throw new FlowError("agent_closed", `lost the connection to the agent: ${this.failure.message}`);
      if (this.ended) throw new FlowError("agent_closed", "the agent closed the connection without answering");
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
    const all = Buffer.concat(this.chunks);
    const nl = all.indexOf(10);
    const rest = all.subarray(nl + 1);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.newline = rest.includes(10);
    return all.subarray(0, nl);
  }
}

const decodeAnswer = (line: Buffer): Answer => {
  let answer: unknown;
  try {
    answer = JSON.parse(line.toString("utf8"));
  } catch {
    throw new FlowError("malformed_answer", "the agent's answer is not JSON");
  }
  if (!isObject(answer)) throw new FlowError("malformed_answer", "the agent's answer is not a JSON object");
  return answer;
};

const stdoutText = (answer: Answer): string => {
  const data = answer["stdout_b64"];
  return typeof data === "string" ? Buffer.from(data, "base64").toString("utf8") : "";
};

const exitOf = (answer: Answer): number => (isInt(answer["exit"]) ? answer["exit"] : 0);

/** The agent's stderr text as a message, without a leading "error: ". */
const stderrMessage = (answer: Answer): string | undefined => {
  const text = typeof answer["stderr"] === "string" ? answer["stderr"].trim() : "";
  if (!text) return undefined;
  return text.startsWith("error: ") ? text.slice("error: ".length) : text;
};

const parseJsonOrText = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

// ---- durations ----------------------------------------------------------------------------------

/**
 * A duration as the agent takes it: humantime text is passed as is (trimmed); seconds become
 * whole milliseconds, e.g. 1.5 -> "1500ms".
 */
export const durationText = (duration: Duration): string => {
  if (typeof duration === "number") {
    if (!Number.isFinite(duration) || duration < 0)
      throw new RangeError(`a duration must be a finite number of seconds, zero or more; got ${duration}`);
    return `${Math.round(duration * 1000)}ms`;
  }
  if (typeof duration === "string") {
    const text = duration.trim();
    if (!text) throw new RangeError("a duration is empty");
    return text;
  }
  throw new TypeError(`a duration is humantime text (e.g. "5s") or a number of seconds; got ${typeof duration}`);
};

// ---- steps --------------------------------------------------------------------------------------

export interface StepOptions {
  /** Display text for the step (the name still identifies it). */
  label?: string;
}

interface BodyResult {
  exit: number;
  kept: Buffer;
  total: number;
}

const stepEnv = (idempotencyKey: string): Record<string, string> => {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(liveEnv())) if (v !== undefined && !k.startsWith("FLOW_")) env[k] = v;
  env["FLOW_IDEMPOTENCY_KEY"] = idempotencyKey;
  return env;
};

const execFailure = (file: string, err: NodeJS.ErrnoException): BodyResult => {
  const missing = err.code === "ENOENT";
  process.stderr.write(`flowsvc step: ${file}: ${missing && !file.includes("/") ? "command not found" : err.message}\n`);
  return { exit: missing ? 127 : 126, kept: Buffer.alloc(0), total: 0 };
};

const runBody = (cmd: readonly string[], idempotencyKey: string): Promise<BodyResult> =>
  new Promise((resolve) => {
    const [file = "", ...args] = cmd;
    const kept: Buffer[] = [];
    let keptBytes = 0;
    let total = 0;
    let settled = false;
    const settle = (result: BodyResult): void => {
      if (!settled) resolve(result);
      settled = true;
    };
    let child: ChildProcessByStdio<null, Readable, null>;
    try {
      child = spawn(file, args, { env: stepEnv(idempotencyKey), stdio: ["inherit", "pipe", "inherit"] });
    } catch {
      settle(execFailure(file, Object.assign(new Error("no such file or directory"), { code: "ENOENT" }))); // an empty name
      return;
    }
    child.stdout.on("data", (chunk: Buffer) => {
      total += chunk.length;
      if (keptBytes < STEP_OUTPUT_LIMIT) {
        const part = chunk.subarray(0, STEP_OUTPUT_LIMIT - keptBytes);
        kept.push(part);
        keptBytes += part.length;
      }
    });
    child.once("error", (err) => {
      if (child.pid === undefined) settle(execFailure(file, err));
    });
    child.once("close", (code, signal) => {
      const exit = code ?? (signal !== null ? 128 + (constants.signals[signal] ?? 0) : 1);
      settle({ exit, kept: Buffer.concat(kept), total });
    });
  });

/** Starts a step: the agent answers a replay or a new position with its idempotency key. */
const begin = async (c: Connection, name: string, label: string | undefined): Promise<Answer> => {
  if (typeof name !== "string" || !name) throw new FlowError("invalid_argument", "a step needs a non-empty name");
  const answer = await c.call("step", { name, label });
  if (answer["replay"] !== true && (answer["position"] === undefined || typeof answer["idempotency_key"] !== "string")) {
    throw new FlowError("malformed_answer", "the agent's step answer has no position or idempotency_key");
  }
  return answer;
};

/** Records a new step's result (`body`: the exit code, the kept stdout, the whole stdout's size); an over-limit output comes back as a recorded failure. */
const complete = async (c: Connection, position: unknown, body: BodyResult): Promise<void> => {
  try {
    await c.call("step.complete", {
      position,
      stdout_b64: body.kept.toString("base64"),
      exit: body.exit,
      overflow_bytes: body.total > STEP_OUTPUT_LIMIT ? body.total : undefined,
    });
  } catch (err) {
    if (err instanceof FlowError && err.code === "step_output_too_large") throw new StepFailed(err.exit ?? 1, "", err.message);
    throw err;
  }
};

/** A replayed step's stdout, or its recorded failure thrown. */
const replayed = (answer: Answer): string => {
  const stdout = stdoutText(answer);
  const exit = exitOf(answer);
  if (exit !== 0) throw new StepFailed(exit, stdout, stderrMessage(answer));
  return stdout;
};

/**
 * Runs `cmd` once as a durable step and answers its stdout (UTF-8). The command runs with the
 * script's environment minus every FLOW_* variable, plus FLOW_IDEMPOTENCY_KEY (the same on every
 * replay), in the current directory; its stderr goes to the script's stderr; its stdout is
 * returned, not echoed. A non-zero exit throws StepFailed. On replay the command does not run.
 */
export const step = async (name: string, cmd: readonly string[], options: StepOptions = {}): Promise<string> => {
  if (!Array.isArray(cmd) || cmd.length === 0 || !cmd.every((a) => typeof a === "string")) {
    throw new TypeError('step() takes the command as a non-empty array of strings, e.g. ["make", "all"]');
  }
  return Connection.with(async (c) => {
    const answer = await begin(c, name, options.label);
    if (answer["replay"] === true) return replayed(answer);
    const body = await runBody(cmd, answer["idempotency_key"] as string);
    await complete(c, answer["position"], body);
    const stdout = body.kept.toString("utf8");
    if (body.exit !== 0) throw new StepFailed(body.exit, stdout);
    return stdout;
  });
};

const errorText = (err: unknown): string => (err instanceof Error ? err.message || err.name : String(err));

/** What a stepFn body produced: JSON text and exit 0, or the error text and exit 1. */
const runFn = async <T>(name: string, fn: () => T | Promise<T>): Promise<{ text: string; exit: number; error?: unknown }> => {
  let value: T;
  try {
    value = await fn();
  } catch (error) {
    return { text: errorText(error), exit: 1, error };
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    return { text: `stepFn ${JSON.stringify(name)} returned a value that is not JSON-serialisable: ${errorText(error)}`, exit: 1, error };
  }
  return { text: text ?? "null", exit: 0 };
};

/**
 * Runs `fn()` once as a durable step and answers its JSON-serialisable result. The result is
 * recorded as the step's stdout (JSON text, exit 0) and answered as it reads back from JSON on
 * every pass (undefined becomes null, a Date its ISO text, on the first pass too), so the script
 * sees the same value whether the step ran or replayed. When `fn` throws, the step is recorded as
 * failed (exit 1, the error message as stdout) and StepFailed is thrown (its `cause` the original
 * error on the first pass); a replay throws the same StepFailed without calling `fn`.
 */
export const stepFn = async <T>(name: string, fn: () => T | Promise<T>, options: StepOptions = {}): Promise<T> => {
  if (typeof fn !== "function") throw new TypeError("stepFn() takes a function of no arguments");
  return Connection.with(async (c) => {
    const answer = await begin(c, name, options.label);
    if (answer["replay"] === true) return JSON.parse(replayed(answer)) as T;
    const result = await runFn(name, fn);
    const data = Buffer.from(result.text, "utf8");
    await complete(c, answer["position"], { exit: result.exit, kept: data.subarray(0, STEP_OUTPUT_LIMIT), total: data.length });
    if (result.exit !== 0) throw new StepFailed(result.exit, result.text, undefined, { cause: result.error });
    return JSON.parse(result.text) as T;
  });
};

// ---- waits --------------------------------------------------------------------------------------

/** A durable sleep ("5s", "1m", "2h", "30d", or seconds): the run parks and is replayed once the timer fired. */
export const sleep = async (duration: Duration): Promise<void> => {
  const text = durationText(duration);
  await Connection.with((c) => c.call("sleep", { duration: text }));
};

export interface WaitOptions {
  /** Give up after this long: the wait then answers null (recorded: a replay takes the same branch). */
  timeout?: Duration;
}

/**
 * Waits for the next signal `name` sent to this run (`flow signal <run> <name> --payload <json>`)
 * and answers its payload parsed from JSON; null when a bounded wait timed out. Names starting
 * "event:" are refused. A bounded wait needs an agent that speaks socket protocol v2.
 */
export const waitSignal = async <T = unknown>(name: string, options: WaitOptions = {}): Promise<T | null> => {
  if (typeof name !== "string" || !name) throw new FlowError("invalid_argument", "waitSignal needs a non-empty signal name");
  if (name.startsWith("event:")) {
    throw new FlowError(
      "invalid_argument",
      `signal names starting "event:" are refused: ${JSON.stringify(name)} names an event, not a signal`,
      2,
    );
  }
  const timeout = options.timeout === undefined ? undefined : durationText(options.timeout);
  const answer = await Connection.with(async (c) => {
    if (timeout !== undefined) {
      const version = await c.hello();
      if (version < 2) {
        throw new FlowError(
          "unsupported_protocol",
          `bounded waits need an agent that speaks socket protocol v2 (this agent speaks v${version})`,
        );
      }
    }
    return c.call("wait-signal", { name, timeout });
  });
  const exit = exitOf(answer);
  if (exit === 124) return null;
  if (exit !== 0)
    throw new FlowError("wait_failed", stderrMessage(answer) ?? `waitSignal ${JSON.stringify(name)} failed with exit code ${exit}`, exit);
  const text = stdoutText(answer).trim();
  return text ? (parseJsonOrText(text) as T) : null;
};

// ---- events -------------------------------------------------------------------------------------

export interface EmitOptions {
  /** The event's subject key. */
  key?: string;
}

/** An event type: 1-64 of [A-Za-z0-9._-] (docs/internals.md; the flow clients and the agent check it too). */
const EVENT_TYPE = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Emits an event with a JSON-serialisable payload; answers the event id (checkpointed by position).
 * A type that is not 1-64 of [A-Za-z0-9._-] is refused before anything is sent (exit 2).
 */
export const emit = async (type: string, payload?: unknown, options: EmitOptions = {}): Promise<string> => {
  if (typeof type !== "string" || !type) throw new FlowError("invalid_argument", "emit needs a non-empty event type");
  if (!EVENT_TYPE.test(type))
    throw new FlowError("invalid_argument", `an event type is 1-64 characters from [A-Za-z0-9._-], got ${type}`, 2);
  const answer = await Connection.with((c) => c.call("emit", { type, key: options.key, payload }));
  const id = answer["event_id"];
  return typeof id === "string" && id ? id : stdoutText(answer).trim();
};

// ---- calls --------------------------------------------------------------------------------------

/** A failed or cancelled child run: the agent's stderr without its `flow: call: ` prefix, thrown as call_failed. */
const callOutcome = <T>(answer: Answer): T => {
  const exit = exitOf(answer);
  if (exit !== 0) {
    const text = (stderrMessage(answer) ?? "").replace(/^flow: call: /, "");
    throw new FlowError("call_failed", text || `the called run failed (exit code ${exit})`, exit);
  }
  const text = stdoutText(answer).trim();
  return (text ? parseJsonOrText(text) : null) as T;
};

const callChild = async <T>(fields: Record<string, unknown>): Promise<T> =>
  callOutcome<T>(await Connection.with((c) => c.call("call", fields)));

const nonEmpty = (what: string, value: unknown): string => {
  if (typeof value !== "string" || !value) throw new FlowError("invalid_argument", `${what} must be a non-empty string`, 2);
  return value;
};

/**
 * Runs one node of `kind` with `config` (a JSON object) as a child run, waits for it and answers the
 * node's output (`flow call node <kind> --config <json>`). The run parks until the child ends; the
 * call is checkpointed by position, so a replay answers the recorded output and starts no child. A
 * failed or cancelled child throws FlowError `call_failed` (exit 1) with the child's error.
 */
export const callNode = async <T = unknown>(kind: string, config?: Record<string, unknown>): Promise<T> => {
  const node = nonEmpty("callNode's kind", kind);
  if (config !== undefined && config !== null && !isObject(config)) throw new TypeError("callNode's config must be a JSON object");
  return callChild<T>({ node, config });
};

/** Runs the stored graph `name` with `input` (a JSON value) as a child run and answers its output (`flow call graph <name> --input <json>`); as callNode otherwise. */
export const callGraph = async <T = unknown>(name: string, input?: unknown): Promise<T> =>
  callChild<T>({ graph: nonEmpty("callGraph's name", name), input });

/**
 * Runs a graph document (its JSON text, or the document as an object) with `input` as a child run
 * and answers its output (`flow call graph --definition <file> --input <json>`); the server checks
 * it as any submitted graph. As callNode otherwise.
 */
export const callDefinition = async <T = unknown>(definition: string | Record<string, unknown>, input?: unknown): Promise<T> => {
  if (typeof definition !== "string" && !isObject(definition))
    throw new TypeError("callDefinition takes the graph document as JSON text or an object");
  const text = typeof definition === "string" ? definition : JSON.stringify(definition);
  nonEmpty("callDefinition's document", text);
  return callChild<T>({ definition_b64: Buffer.from(text, "utf8").toString("base64"), input });
};

// ---- state --------------------------------------------------------------------------------------

export interface StateOptions {
  /** Project-wide state under this entity; run-private without it. */
  entity?: string;
}

const stateCall = (action: string, fields: Record<string, unknown>): Promise<Answer> =>
  Connection.with((c) => c.call("state", { action, ...fields }));

/**
 * Key-value state, run-private or project-wide per entity. Not checkpointed: each pass reads the
 * current value. The agent prints a string value raw and any other value as JSON (as `flow state
 * get` does), so from that text alone a string that reads as JSON ("42", "1.10", "true") comes back
 * parsed. When the answer also carries the value itself (`found` and `value` for get, `items` for
 * list), that is used instead and every value round-trips exactly.
 */
export const state = {
  /** The value, or null when the key is unset. */
  async get<T = unknown>(key: string, options: StateOptions = {}): Promise<T | null> {
    const answer = await stateCall("get", { key, entity: options.entity });
    if (typeof answer["found"] === "boolean") return answer["found"] ? ((answer["value"] ?? null) as T) : null;
    const text = stdoutText(answer);
    if (text === "") return null;
    return parseJsonOrText(text.endsWith("\n") ? text.slice(0, -1) : text) as T;
  },
  /** Stores a JSON-serialisable value. */
  async set(key: string, value: unknown, options: StateOptions = {}): Promise<void> {
    const text = JSON.stringify(value) as string | undefined;
    if (text === undefined) throw new TypeError(`state.set ${JSON.stringify(key)}: the value is not JSON-serialisable`);
    await stateCall("set", { key, entity: options.entity, value: text });
  },
  async delete(key: string, options: StateOptions = {}): Promise<void> {
    await stateCall("delete", { key, entity: options.entity });
  },
  /** Every key and its value. */
  async list(options: StateOptions = {}): Promise<Record<string, unknown>> {
    const answer = await stateCall("list", { entity: options.entity });
    const out: Record<string, unknown> = {};
    const items = answer["items"];
    if (Array.isArray(items) && items.every((i) => isObject(i) && typeof i["key"] === "string")) {
      for (const i of items as Array<{ key: string; value?: unknown }>) out[i.key] = i.value ?? null;
      return out;
    }
    for (const line of stdoutText(answer).split("\n")) {
      if (!line) continue;
      const tab = line.indexOf("\t");
      if (tab < 0) out[line] = "";
      else out[line.slice(0, tab)] = parseJsonOrText(line.slice(tab + 1));
    }
    return out;
  },
};
