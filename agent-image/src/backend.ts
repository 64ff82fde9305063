/**
 * The agent's one dependency on the outside: where it claims its job and records what the script
 * does. `AgentApiClient` (HTTP, agent API) is the real one; `flow run` plugs an in-process local
 * engine in, so the same agent code runs a script in place with no server.
 *
 * `call` answers `pending` when the run must park (the agent ends the script and calls `suspend`).
 * A backend that can wait in place (the local engine) simply resolves `call` later with `done`.
 */
import type {
  ActivityClaim,
  CallRequest,
  CallResponse,
  ClaimRequest,
  ClaimResponse,
  FinishRequest,
  JournalEntry,
  LogChunk,
  RecordRequest,
  StateRequest,
} from "@flowsvc/core";

export type AnyClaim = (ClaimResponse & { kind: "script" }) | ActivityClaim;

export interface ActivityFinish {
  exit_code: number;
  stdout_b64: string;
  error?: string;
  duration_ms: number;
}

export interface StateAnswer {
  value?: unknown;
  found?: boolean;
  items?: Array<{ key: string; value: unknown }>;
}

export interface AgentBackend {
  claim(body: ClaimRequest): Promise<AnyClaim>;
  /** Renews the lease; undefined when the backend has no lease (local engine). */
  heartbeat(): Promise<number | undefined>;
  record(body: RecordRequest): Promise<JournalEntry>;
  call(body: CallRequest): Promise<CallResponse>;
  suspend(): Promise<"parked" | "requeued">;
  state(body: StateRequest): Promise<StateAnswer>;
  log(chunks: readonly LogChunk[]): Promise<void>;
  annotate(markdown: string): Promise<void>;
  finish(body: FinishRequest): Promise<string | undefined>;
  finishActivity(body: ActivityFinish): Promise<string | undefined>;
  close(): Promise<void>;
}
