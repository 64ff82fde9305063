/**
 * The executor interface of graph nodes (graph contract, "The engine (B)"). The driver
 * (controller/src/graph/driver.ts) evaluates a node's `if` and config, then hands it to the one
 * executor whose `type` matches; the executor answers an outcome and never writes node state
 * itself: the driver records it (node state commits before any dependent starts).
 */
import type { Pool } from "pg";
import type { Dispatcher } from "undici";
import type { CredentialKind, CredentialValue, GraphNode, GraphScope, NodeStatus } from "@flowsvc/core";
import type { Keyring } from "@flowsvc/store";
import type { ControllerLogger } from "../../dispatcher.js";

export type { GraphNode, GraphScope, NodeStatus };

/** A field an approval node asks for (D's core/src/graph/approval-fields.ts has the one definition; this mirrors its shape). */
export interface AwaitingField {
  name: string;
  type: "text" | "textarea" | "select";
  required?: boolean;
  options?: string[];
  default?: string;
}

/** A credential resolved for an http or connector node: its name, its value, and what the run's log must mask. */
export interface ResolvedCredential {
  name: string;
  value: CredentialValue;
  masks: string[];
}

export interface NodeRun {
  id: string;
  orgId: string;
  projectId: string;
  rootRunId: string;
  parentRunId: string | null;
  trusted: boolean;
  input: unknown;
  /** The stored graph's name when the run came from one (`filename` = `graph:<name>`), else null. */
  graphName: string | null;
}

export interface NodeContext {
  db: Pool;
  keyring: Keyring;
  log: ControllerLogger;
  run: NodeRun;
  /** The node as parsed. */
  node: GraphNode;
  /** node.config with $expr/$template already evaluated against scope. */
  config: unknown;
  scope: GraphScope;
  /** 1-based. */
  attempt: number;
  publicUrl: string | undefined;
  /**
   * The dispatcher for requests to a URL the graph's author chose (the http node): the operator's
   * egress policy, checked on the address each connection opens to (controller/src/net/egress-agent.ts).
   */
  egress: Dispatcher;
  /**
   * http/connector credentials, resolved at dispatch by core's one resolver; untrusted runs,
   * missing names, wrong kinds and unusable accounts throw FlowError: the node fails and nothing is sent.
   */
  credential(name: string, kinds?: readonly CredentialKind[]): Promise<ResolvedCredential>;
  /** Once per (run, node, attempt): a replay answers the id recorded the first time. */
  emit(type: string, payload: unknown, key?: string): Promise<string>;
  /** The run's log, masked. */
  writeLog(text: string): Promise<void>;
  /** Aborted when the run is cancelled. */
  signal: AbortSignal;
}

/** What a code or shell node runs on an agent (the engine's own outcome: the node becomes a job of the run). */
export interface AgentJobSpec {
  source: string;
  filename: string;
  interpreter: string[];
  /** ENV_VAR -> credential name, resolved at claim like a script's `--credential`. */
  credentials: Record<string, string>;
  env: Record<string, string>;
  capabilities: string[];
  /** `config.timeout` in ms: past it (counted from the attempt's start) the job is ended and the attempt fails (store's expireNodeJobs). */
  timeout_ms?: number;
}

export type NodeOutcome =
  | { kind: "succeeded"; output: unknown }
  /** The retry policy applies, unless `final`: retrying cannot change it (a destination the egress policy refuses). */
  | { kind: "failed"; error: string; output?: unknown; final?: boolean }
  | {
      kind: "park";
      signal: string;
      deadline?: Date;
      awaiting?: { prompt: string; fields: AwaitingField[] };
      eventWait?: { type: string; when?: string };
    }
  /** The node ends when the child run ends: its status and output. */
  | { kind: "child"; runId: string }
  /** Engine-internal (code/shell): the node becomes an agent job of the run and ends when the job finishes. */
  | { kind: "job"; job: AgentJobSpec };

export interface NodeExecutor {
  readonly type: string | ((type: string) => boolean);
  start(ctx: NodeContext): Promise<NodeOutcome>;
}
