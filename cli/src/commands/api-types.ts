/**
 * The shapes the CLI reads from the user API (docs/internals.md, "User API"). Fields the CLI only
 * passes through to `-o json|yaml` are not listed: those documents are printed as the API sent them.
 */
import { FlowError } from "@flowsvc/core/errors";

export interface RunRecord {
  id: string;
  status: string;
  /** The workflow type: flowsvc/script/v1, flowsvc/pipeline/v1 or flowsvc-graph/v1. */
  workflow?: string;
  substate?: { name?: string; kind?: string } | null;
  deadline?: string | null;
  filename?: string;
  tags?: string[];
  created_at?: string;
  started_at?: string | null;
  finished_at?: string | null;
  output?: unknown;
  error?: string | null;
  annotations?: unknown[];
  attempt?: number;
  retry?: { attempts: number; backoff_ms: number } | null;
  rerun_of?: string | null;
  parent_run_id?: string | null;
  activities?: Array<{ name: string; status: string; exit_code: number | null }>;
  /** A graph run's nodes (GET {scoped}/runs/<id> of a flowsvc-graph/v1 run). */
  nodes?: NodeRecord[];
}

/** One node of a graph run, as `flow status` and `flow steps` show it. */
export interface NodeRecord {
  node_id: string;
  type: string;
  status: string;
  attempt: number;
  output?: unknown;
  error?: string | null;
  substate?: { name?: string; kind?: string } | null;
}

export { TERMINAL_STATUSES, isTerminalStatus } from "@flowsvc/core/run-status";

export interface SubmitAnswer {
  id: string;
  duplicate?: boolean;
}

export interface StepRecord {
  position: number;
  kind: string;
  name: string;
  ordinal: number;
  status: string;
  exit_code?: number | null;
  output_bytes?: number | null;
  error?: string;
  /** The raw journal result, for a server that sends entries as recorded. */
  result?: { stdout_b64?: string; exit?: number; error?: string } | null;
}

export interface SecretInfo {
  name: string;
  exists?: boolean;
  set_at?: string | null;
}

export interface EventRecord {
  id: string;
  type: string;
  key?: string | null;
  payload?: unknown;
  created_at?: string;
}

/** A list answer: a bare array, or an object carrying the array under one of `keys` (or `items`). */
export const listFrom = <T>(body: unknown, keys: readonly string[]): T[] => {
  if (Array.isArray(body)) return body as T[];
  const record = (body ?? {}) as Record<string, unknown>;
  for (const key of [...keys, "items"]) if (Array.isArray(record[key])) return record[key] as T[];
  throw new FlowError("internal", `the server's answer is not a list of ${keys[0] ?? "items"}`);
};
