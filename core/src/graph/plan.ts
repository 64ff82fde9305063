/**
 * Which nodes of a graph run may start, and how the run ends (graph contract, "core (A)").
 *
 * - A node is ready when it is `pending` and every predecessor is terminal and satisfied:
 *   `success` and `skipped` satisfy (spec: a skipped node still satisfies its dependents).
 * - A node with a `failed` or `cancelled` predecessor never starts; the engine marks it
 *   `cancelled` (`blockedNodes`) and the run fails once nothing is running or parked.
 * - The run succeeds when every node is `success` or `skipped`.
 */
import type { GraphDocument, NodeStatus } from "./model.js";

const SATISFIED: ReadonlySet<NodeStatus> = new Set(["success", "skipped"]);
const BLOCKING: ReadonlySet<NodeStatus> = new Set(["failed", "cancelled"]);
const ACTIVE: ReadonlySet<NodeStatus> = new Set(["running", "parked"]);

type Statuses = Readonly<Record<string, NodeStatus | undefined>>;

const predecessorsOf = (graph: GraphDocument): Map<string, string[]> => {
  const preds = new Map<string, string[]>(graph.nodes.map((n) => [n.id, []]));
  for (const e of graph.edges) preds.get(e.to)?.push(e.from);
  return preds;
};

const statusOf = (statuses: Statuses, id: string): NodeStatus => statuses[id] ?? "pending";

/** The pending nodes whose predecessors are all `success` or `skipped`, in document order. */
export const readyNodes = (graph: GraphDocument, statuses: Statuses): string[] => {
  const preds = predecessorsOf(graph);
  return graph.nodes
    .filter((n) => statusOf(statuses, n.id) === "pending" && preds.get(n.id)!.every((p) => SATISFIED.has(statusOf(statuses, p))))
    .map((n) => n.id);
};

/**
 * The pending nodes that can never start because a node they depend on (directly or through
 * other nodes) `failed` or was `cancelled`: the engine marks them `cancelled`.
 */
export const blockedNodes = (graph: GraphDocument, statuses: Statuses): string[] => {
  const preds = predecessorsOf(graph);
  const blocked = new Set<string>();
  // Document order is not topological; repeat until nothing changes (at most one pass per node).
  for (let changed = true; changed;) {
    changed = false;
    for (const n of graph.nodes) {
      if (blocked.has(n.id) || statusOf(statuses, n.id) !== "pending") continue;
      if (preds.get(n.id)!.some((p) => BLOCKING.has(statusOf(statuses, p)) || blocked.has(p))) {
        blocked.add(n.id);
        changed = true;
      }
    }
  }
  return graph.nodes.filter((n) => blocked.has(n.id)).map((n) => n.id);
};

/**
 * `running` while a node runs or is parked, or one could still start; `failed` when nothing can run
 * any more and some node failed or was cancelled; `succeeded` when every node succeeded or was skipped.
 */
export const graphOutcome = (graph: GraphDocument, statuses: Statuses): "running" | "succeeded" | "failed" => {
  const all = graph.nodes.map((n) => statusOf(statuses, n.id));
  if (all.some((s) => ACTIVE.has(s))) return "running";
  if (all.every((s) => SATISFIED.has(s))) return "succeeded";
  if (readyNodes(graph, statuses).length > 0) return "running";
  return "failed";
};
