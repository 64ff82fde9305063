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
import { startSocketServer } from "./socket-server.js";

export interface FakeBackend extends AgentBackend {
  /** Every call made, in order: `[method, body]`. */
  readonly calls: Array<[string, unknown]>;
}

const missing = (method: string) => (): Promise<never> => Promise.reject(new Error(`the fake backend has no ${method}: the call should not have been made`));

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
    finish: (body) => (calls.push(["finish", body]), pick("finish")(body)),
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
export const pendingCall = (body: CallRequest, substate: { name: string; kind: string } = { name: body.name, kind: body.kind }): CallResponse => ({
  status: "pending",
  entry: { position: body.position, kind: body.kind, name: body.name, ordinal: body.ordinal, status: "pending", result: null },
  substate,
  deadline: null,
});

export const entry = (position: number, kind: string, name: string, ordinal: number, result: unknown, status: "done" | "pending" = "done"): JournalEntry =>
  ({ position, kind, name, ordinal, status, result });

export const b64 = (text: string): string => Buffer.from(text).toString("base64");

export type Answer = Record<string, unknown>;

export interface AgentSocket {
  /** Sends requests on one connection and reads one answer line per request. */
  call(...requests: object[]): Promise<Answer[]>;
  /** Sends one request and waits `ms` for an answer; undefined when none came. */
  callSilent(request: object, ms?: number): Promise<Answer | undefined>;
  readonly events: string[];
  readonly suspended: PendingCall[];
  close(): Promise<void>;
}

/** The agent's socket over a journal and a fake backend. */
export const agentSocket = async (journal: JournalEntry[], backend: AgentBackend = fakeBackend()): Promise<AgentSocket> => {
  const dir = await mkdtemp(join(tmpdir(), "fa-sock-"));
  const events: string[] = [];
  const suspended: PendingCall[] = [];
  let failure: FlowError | undefined;
  const handler = createOpHandler({
    agentId: "agt-test", runId: "run-test", captureIno: 4242, cursor: new JournalCursor(journal),
    backend, outputs: new Map(), logger: silentLogger,
    failure: () => failure,
    onDeterminism: (err) => {
      failure = err;
      events.push(`failed: ${err.message}`);
    },
    onSuspend: (call) => {
      suspended.push(call);
      events.push(`suspended at #${call.position}`);
    },
  });
  const server = await startSocketServer(join(dir, "agent.sock"), handler, silentLogger);
  const exchange = (requests: object[], ms: number | undefined): Promise<Answer[]> =>
    new Promise((resolve, reject) => {
      const socket = createConnection(server.path);
      let text = "";
      const timer = ms === undefined ? undefined : setTimeout(() => {
        socket.destroy();
        resolve([]);
      }, ms);
      socket.setEncoding("utf8").on("data", (d: string) => {
        text += d;
        const lines = text.split("\n").filter(Boolean);
        if (lines.length === requests.length) {
          clearTimeout(timer);
          socket.end();
          events.push(`answered ${lines.length}`);
          resolve(lines.map((l) => JSON.parse(l) as Answer));
        }
      });
      socket.on("error", reject);
      socket.write(requests.map((r) => `${JSON.stringify(r)}\n`).join(""));
    });
  return {
    call: (...requests) => exchange(requests, undefined),
    callSilent: async (request, ms = 200) => (await exchange([request], ms))[0],
    events,
    suspended,
    close: async () => {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
};

/** A script claim with defaults. */
export const scriptClaim = (fields: Partial<Extract<AnyClaim, { kind: "script" }>> = {}): AnyClaim => ({
  kind: "script", job_id: "job-test", run_id: "run-test", project: "prj-test", attempt: 1, source: "true\n", filename: "s.sh",
  interpreter: ["bash", "-eu"], env: {}, masks: [], journal: [], lease_ms: 60_000, trigger: {}, ...fields,
});
