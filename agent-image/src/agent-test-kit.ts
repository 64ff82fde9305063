/**
 * For the agent's unit tests: a fake AgentBackend that records every call and answers from
 * scripted handlers, and the agent socket served by createOpHandler over it. Not used at run time.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallRequest, CallResponse, FlowError, JournalEntry, StateRequest } from "@flowsvc/core";
import type { ActivityFinish, AgentBackend, AnyClaim, StateAnswer } from "./backend.js";
import { JournalCursor } from "./journal-cursor.js";
import { silentLogger } from "./logger.js";
import type { PendingCall } from "./op-kit.js";
import { createOpHandler } from "./socket-ops.js";
import { startSocketServer, type HandlerResult, type SocketHandler } from "./socket-server.js";

export interface FakeBackend extends AgentBackend {
  /** Every call made, in order: `[method, body]`. */
  readonly calls: Array<[string, unknown]>;
}

const missing = (method: string) => (): Promise<never> =>
  Promise.reject(new Error(`the fake backend has no ${method}: the call should not have been made`));

/** A backend whose methods are the given ones; any other method rejects (and is still recorded). */
export const fakeBackend = (methods: Partial<AgentBackend> = {}): FakeBackend => {
  const calls: Array<[string, unknown]> = [];
  const pick = <K extends keyof AgentBackend>(name: K): AgentBackend[K] => methods[name] ?? missing(name);
  return {
    calls,
    claim: (body) => (calls.push(["claim", body]), pick("claim")(body)),
    heartbeat: () => (calls.push(["heartbeat", {}]), methods.heartbeat ? methods.heartbeat() : Promise.resolve(undefined)),
    record: (body) => (calls.push(["record", body]), pick("record")(body)),
    call: (body: CallRequest): Promise<CallResponse> => (calls.push(["call", body]), pick("call")(body)),
    suspend: () => (calls.push(["suspend", {}]), pick("suspend")()),
    state: (body: StateRequest): Promise<StateAnswer> => (calls.push(["state", body]), pick("state")(body)),
    log: (chunks) => (calls.push(["log", chunks]), methods.log ? methods.log(chunks) : Promise.resolve()),
    annotate: (markdown) => (calls.push(["annotate", markdown]), pick("annotate")(markdown)),
    // A finish that carries the last log batch is recorded as the server applies it: the log, then the finish.
    finish: (body) => {
      const { log, ...rest } = body;
      if (log) calls.push(["log", log]);
      calls.push(["finish", rest]);
      return pick("finish")(body);
    },
    finishActivity: (body: ActivityFinish) => (calls.push(["finishActivity", body]), pick("finishActivity")(body)),
    close: () => (calls.push(["close", {}]), methods.close ? methods.close() : Promise.resolve()),
  };
};

/** A `done` answer of /agent/v1/call for `body` with `result`. */
export const doneCall = (body: CallRequest, result: unknown): CallResponse => ({
  status: "done",
  entry: { position: body.position, kind: body.kind, name: body.name, ordinal: body.ordinal, status: "done", result },
});

/** A `pending` answer of /agent/v1/call for `body`. */
export const pendingCall = (
  body: CallRequest,
  substate: { name: string; kind: string } = { name: body.name, kind: body.kind },
): CallResponse => ({
  status: "pending",
  entry: { position: body.position, kind: body.kind, name: body.name, ordinal: body.ordinal, status: "pending", result: null },
  substate,
  deadline: null,
});

/** A journal entry at `[position, kind, name, ordinal]`. */
export const entry = (
  [position, kind, name, ordinal]: [number, string, string, number],
  result: unknown,
  status: "done" | "pending" = "done",
): JournalEntry => ({ position, kind, name, ordinal, status, result });

export const b64 = (text: string): string => Buffer.from(text).toString("base64");

export type Answer = Record<string, unknown>;

export interface AgentSocket {
  /** Sends requests on one connection and reads one answer line per request (a string is sent as the line it is). */
  call(...requests: Array<object | string>): Promise<Answer[]>;
  /**
   * Sends one request; undefined when the agent handled it without an answer (known from the
   * handler's result, not from a timer), else the answer.
   */
  callSilent(request: object): Promise<Answer | undefined>;
  /** What the agent reported: `failed: <message>` (onDeterminism), `suspended at #<position>`, `answered <n>`. */
  readonly events: string[];
  /** Resolves once an event starting with `prefix` has been reported. */
  event(prefix: string): Promise<void>;
  readonly suspended: PendingCall[];
  close(): Promise<void>;
}

/** An event log that tests can wait on. */
const eventLog = (): { events: string[]; note: (e: string) => void; event: (prefix: string) => Promise<void> } => {
  const events: string[] = [];
  const waiters: Array<{ prefix: string; resolve: () => void }> = [];
  const note = (e: string): void => {
    events.push(e);
    for (const w of waiters.filter((x) => e.startsWith(x.prefix))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  };
  const event = (prefix: string): Promise<void> =>
    events.some((e) => e.startsWith(prefix)) ? Promise.resolve() : new Promise((resolve) => waiters.push({ prefix, resolve }));
  return { events, note, event };
};

/** Wraps a handler so that each result is also handed to `seen`, after its afterAnswer ran. */
const observed =
  (handler: SocketHandler, seen: (r: HandlerResult) => void): SocketHandler =>
  async (request) => {
    const r = await handler(request);
    return {
      ...r,
      afterAnswer: () => {
        r.afterAnswer?.();
        seen(r);
      },
    };
  };

/** Sends requests on one connection; resolves with one answer line per request, or [] once `silent` says none comes. */
const exchange = (path: string, requests: Array<object | string>, silent?: Promise<HandlerResult>): Promise<Answer[]> =>
  new Promise((resolve, reject) => {
    const socket = createConnection(path);
    let text = "";
    void silent?.then((r) => {
      if (r.response) return;
      socket.destroy();
      resolve([]);
    });
    socket.setEncoding("utf8").on("data", (d: string) => {
      text += d;
      const lines = text.split("\n").filter(Boolean);
      if (lines.length !== requests.length) return;
      socket.end();
      resolve(lines.map((l) => JSON.parse(l) as Answer));
    });
    socket.on("error", reject);
    socket.write(requests.map((r) => `${typeof r === "string" ? r : JSON.stringify(r)}\n`).join(""));
  });

/** The agent's socket over a journal and a fake backend. */
export const agentSocket = async (journal: JournalEntry[], backend: AgentBackend = fakeBackend()): Promise<AgentSocket> => {
  const dir = await mkdtemp(join(tmpdir(), "fa-sock-"));
  const log = eventLog();
  const suspended: PendingCall[] = [];
  let failure: FlowError | undefined;
  let handled: ((r: HandlerResult) => void) | undefined;
  const handler = createOpHandler({
    agentId: "agt-test",
    runId: "run-test",
    captureIno: 4242,
    cursor: new JournalCursor(journal),
    backend,
    outputs: new Map(),
    logger: silentLogger,
    failure: () => failure,
    onDeterminism: (err) => {
      failure = err;
      log.note(`failed: ${err.message}`);
    },
    onSuspend: (call) => {
      suspended.push(call);
      log.note(`suspended at #${call.position}`);
    },
  });
  const server = await startSocketServer(
    join(dir, "agent.sock"),
    observed(handler, (r) => handled?.(r)),
    silentLogger,
  );
  const call = async (...requests: Array<object | string>): Promise<Answer[]> => {
    const answers = await exchange(server.path, requests);
    log.note(`answered ${answers.length}`);
    return answers;
  };
  return {
    call,
    callSilent: async (request) => {
      const result = new Promise<HandlerResult>((resolve) => (handled = resolve));
      const [answer] = await exchange(server.path, [request], result);
      handled = undefined;
      if (answer) log.note("answered 1");
      return answer;
    },
    events: log.events,
    event: log.event,
    suspended,
    close: async () => {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
};

/** A script claim with defaults. */
export const scriptClaim = (fields: Partial<Extract<AnyClaim, { kind: "script" }>> = {}): AnyClaim => ({
  kind: "script",
  job_id: "job-test",
  run_id: "run-test",
  project: "prj-test",
  attempt: 1,
  source: "true\n",
  filename: "s.sh",
  interpreter: ["bash", "-eu"],
  env: {},
  masks: [],
  journal: [],
  lease_ms: 60_000,
  trigger: {},
  ...fields,
});
