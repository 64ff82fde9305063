/**
 * The executor list: one line per executor (the graph contract's shared file; keep edits to one
 * line each so merges stay easy). The driver picks the first whose `type` matches.
 */
import type { NodeExecutor } from "./types.js";
import { httpExecutor } from "./http.js";
import { codeExecutor, shellExecutor } from "./code.js";
import { switchExecutor } from "./switch.js";
import { emitExecutor } from "./emit.js";
import { approvalExecutor } from "./approval.js";
import { connectorExecutor } from "./connector.js";
import { workflowExecutor } from "./workflow.js";
import { eventExecutor } from "./event.js";
import { triggerExecutor } from "./trigger.js";
import { webhookExecutor } from "./webhook.js";

export * from "./types.js";

export const EXECUTORS: NodeExecutor[] = [
  // one line per executor
  httpExecutor,
  codeExecutor,
  shellExecutor,
  switchExecutor,
  emitExecutor,
  approvalExecutor,
  connectorExecutor,
  workflowExecutor,
  eventExecutor,
  triggerExecutor,
  webhookExecutor,
];

/** The executor of a node type, or undefined (the driver fails the node: no executor). */
export const executorFor = (type: string): NodeExecutor | undefined =>
  EXECUTORS.find((e) => (typeof e.type === "string" ? e.type === type : e.type(type)));
