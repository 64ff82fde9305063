/**
 * The executor list: one line per executor (the graph contract's shared file; keep edits to one
 * line each so merges stay easy). The driver picks the first whose `type` matches.
 */
import type { NodeExecutor } from "./types.js";
import { approvalExecutor } from "./approval.js";
import { connectorExecutor } from "./connector.js";

export * from "./types.js";

export const EXECUTORS: NodeExecutor[] = [
  // one line per executor, e.g. httpExecutor,
  approvalExecutor,
  connectorExecutor,
];

/** The executor of a node type, or undefined (the driver fails the node: no executor). */
export const executorFor = (type: string): NodeExecutor | undefined =>
  EXECUTORS.find((e) => (typeof e.type === "string" ? e.type === type : e.type(type)));
