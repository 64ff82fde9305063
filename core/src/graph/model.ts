/**
 * The graph document `flowsvc-graph/v1` (spec, "Graph document shape"): its types, its limits and
 * the zod schema of its shape. The per-type config rules are node-configs.ts; the checks that need
 * the whole document (ids, edges, cycles, expressions) are parse.ts. Contract: the graph contract's
 * "core (A)" section (docs/internals.md, "Graphs").
 */
import { z } from "zod";

export const GRAPH_VERSION = "flowsvc-graph/v1";

/** A node id: usable in CEL as `nodes.<id>` (an id with `-` needs `nodes["a-b"]`). */
export const NODE_ID = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/** Limits of one document (README "Graphs", "Limits"). */
export const GRAPH_LIMITS = {
  /** Most nodes in one graph. */
  nodes: 500,
  /** Most edges in one graph. */
  edges: 2000,
  /** Largest document text, in bytes of UTF-8 (`parseGraphText`). */
  textBytes: 1024 * 1024,
  /** Deepest nesting of a node's `config`, the config object itself counting as 1. */
  configDepth: 32,
  /** Most attempts a `retry` may ask for (the first attempt included). */
  retryAttempts: 20,
  /** Longest `retry.backoff`. */
  retryBackoffMs: 3_600_000,
  /** Most problems one check reports (the rest are summarised in one last problem). */
  problems: 100,
  /** Most CEL expressions in one document (`if`, `$expr`, template holes, `when`): each is compiled when checked. */
  expressions: 5000,
  /** Most `{{ }}` holes in one `$template`. */
  templateHoles: 256,
} as const;

/** The backoff between attempts when `retry` gives none. */
export const DEFAULT_RETRY_BACKOFF_MS = 1000;

/** The built-in node types (spec, "Graph document shape"); connector types are `<service>.<action>`. */
export const NODE_TYPES = ["http", "code", "shell", "workflow", "event", "approval", "switch", "trigger", "emit", "webhook"] as const;
export type BuiltinNodeType = (typeof NODE_TYPES)[number];

/** A connector node type: `slack.post_message`, `anthropic.messages`. */
export const CONNECTOR_TYPE = /^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$/;

export interface GraphRetry {
  /** Total attempts, the first included (1..GRAPH_LIMITS.retryAttempts). */
  attempts: number;
  backoff_ms: number;
}
export interface GraphNode {
  id: string;
  type: string;
  config: Record<string, unknown>;
  if?: string;
  retry?: GraphRetry;
}
export interface GraphEdge {
  from: string;
  to: string;
}
export interface GraphDocument {
  version: typeof GRAPH_VERSION;
  nodes: GraphNode[];
  edges: GraphEdge[];
}
/** One thing wrong with a document: where (`nodes[3].config.url`) and what (`required`). */
export interface GraphProblem {
  path: string;
  message: string;
}
export type GraphParseResult = { ok: true; graph: GraphDocument } | { ok: false; problems: GraphProblem[] };

/** A node's status in a graph run (the engine stores it; plans and expressions read it). */
export const NODE_STATUSES = ["pending", "running", "parked", "success", "failed", "skipped", "cancelled"] as const;
export type NodeStatus = (typeof NODE_STATUSES)[number];

/** What expressions see: `input.*`, `nodes.<id>.status`, `nodes.<id>.output.*`. */
export interface GraphScope {
  input: unknown;
  nodes: Record<string, { status: NodeStatus; output: unknown }>;
}

/** The shape of one node, before its config is checked against its type. */
export const GraphNodeShape = z
  .object({
    id: z.string().regex(NODE_ID, {
      error: "must be 1-64 characters from [A-Za-z0-9_-], starting with a letter or _ (it is read in expressions as nodes.<id>)",
    }),
    type: z.string().min(1).max(128),
    config: z.record(z.string(), z.unknown()).optional(),
    if: z.string().optional(),
    retry: z
      .object({
        attempts: z.number().int().min(1).max(GRAPH_LIMITS.retryAttempts),
        backoff: z.string().max(64).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

/** The edges of a document. */
export const GraphEdgesShape = z
  .array(z.object({ from: z.string(), to: z.string() }).strict())
  .max(GRAPH_LIMITS.edges, { error: `a graph has at most ${GRAPH_LIMITS.edges} edges` });

/**
 * The top level of a document, each node left to GraphNodeShape: parse.ts checks the nodes one
 * by one, so one malformed node does not hide the other nodes' problems.
 */
export const GraphTopShape = z
  .object({
    version: z.literal(GRAPH_VERSION, { error: `must be "${GRAPH_VERSION}"` }),
    nodes: z
      .array(z.unknown())
      .min(1, { error: "a graph needs at least one node" })
      .max(GRAPH_LIMITS.nodes, { error: `a graph has at most ${GRAPH_LIMITS.nodes} nodes` }),
    edges: GraphEdgesShape.optional(),
  })
  .strict();

/** The shape of a whole document (ids, edges and configs are checked by parse.ts afterwards). */
export const GraphDocumentShape = z
  .object({
    version: z.literal(GRAPH_VERSION, { error: `must be "${GRAPH_VERSION}"` }),
    nodes: z
      .array(GraphNodeShape)
      .min(1, { error: "a graph needs at least one node" })
      .max(GRAPH_LIMITS.nodes, {
        error: `a graph has at most ${GRAPH_LIMITS.nodes} nodes`,
      }),
    edges: z
      .array(z.object({ from: z.string(), to: z.string() }).strict())
      .max(GRAPH_LIMITS.edges, { error: `a graph has at most ${GRAPH_LIMITS.edges} edges` })
      .optional(),
  })
  .strict();
export type GraphDocumentShape = z.infer<typeof GraphDocumentShape>;
