// Node fit for the kubelet simulator's scheduler: a Pod fits a node when the node's labels satisfy
// its nodeSelector and required node affinity (In / NotIn / Exists / DoesNotExist), and it tolerates
// the node's NoSchedule / NoExecute taints. A Pod that fits no node stays Pending with the
// PodScheduled=False/Unschedulable condition the default scheduler writes.
import type { V1Pod, V1Taint, V1Toleration } from "@kubernetes/client-node";

export interface SimNode {
  name: string;
  labels?: Record<string, string>;
  taints?: V1Taint[];
}

const tolerates = (t: V1Toleration, taint: V1Taint): boolean => {
  if (t.effect && t.effect !== taint.effect) return false;
  if (t.operator === "Exists") return !t.key || t.key === taint.key;
  return t.key === taint.key && (t.value ?? "") === (taint.value ?? "");
};

interface Expr {
  key: string;
  operator: string;
  values?: string[];
}

const exprHolds = (e: Expr, labels: Record<string, string>): boolean => {
  const has = Object.hasOwn(labels, e.key);
  switch (e.operator) {
    case "In":
      return has && (e.values ?? []).includes(labels[e.key]!);
    case "NotIn":
      return !has || !(e.values ?? []).includes(labels[e.key]!);
    case "Exists":
      return has;
    case "DoesNotExist":
      return !has;
    default:
      return false;
  }
};

const affinityHolds = (pod: V1Pod, labels: Record<string, string>): boolean => {
  const terms = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (!terms?.length) return true;
  return terms.some((term) => (term.matchExpressions ?? []).every((e) => exprHolds(e, labels)));
};

export const fits = (pod: V1Pod, node: SimNode): boolean => {
  const labels: Record<string, string> = { "kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux", ...node.labels };
  const selector = pod.spec?.nodeSelector ?? {};
  if (!Object.entries(selector).every(([k, v]) => labels[k] === v)) return false;
  if (!affinityHolds(pod, labels)) return false;
  const hard = (node.taints ?? []).filter((t) => t.effect === "NoSchedule" || t.effect === "NoExecute");
  return hard.every((taint) => (pod.spec?.tolerations ?? []).some((t) => tolerates(t, taint)));
};

/** The message the default scheduler writes when no node fits. */
export const unschedulableMessage = (pod: V1Pod, nodes: SimNode[]): string => {
  const selectorFails = (n: SimNode): boolean => {
    const labels: Record<string, string> = { "kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", ...n.labels };
    return !Object.entries(pod.spec?.nodeSelector ?? {}).every(([k, v]) => labels[k] === v) || !affinityHolds(pod, labels);
  };
  const bySelector = nodes.filter(selectorFails).length;
  const other = nodes.length - bySelector;
  const parts = [];
  if (bySelector) parts.push(`${bySelector} node(s) didn't match Pod's node affinity/selector`);
  if (other) parts.push(`${other} node(s) had untolerated taint`);
  return `0/${nodes.length} nodes are available: ${parts.join(", ")}. preemption: 0/${nodes.length} nodes are available: ${nodes.length} Preemption is not helpful for scheduling.`;
};
