/**
 * An agent Pod and its token Secret, exactly as the contract's "Agent Pods" says, and what a Pod's
 * status means for its job. Pure functions: pod-launcher.ts does the I/O.
 */
import type { V1ContainerState, V1Pod, V1Secret, V1Toleration } from "@kubernetes/client-node";
import type { AgentPodSettings } from "../config.js";
import type { LaunchRequest } from "../launcher.js";
import { FLOW_RUN_API_VERSION, FLOW_RUN_KIND, type RunOwner } from "./run-owners.js";

export const AGENT_LABELS = { "app.kubernetes.io/name": "flowsvc-agent", "app.kubernetes.io/managed-by": "flowsvc" } as const;
/** The label selector of every agent Pod (and token Secret) the launcher made. */
export const AGENT_SELECTOR = Object.entries(AGENT_LABELS)
  .map(([k, v]) => `${k}=${v}`)
  .join(",");
export const JOB_ID_LABEL = "flowsvc.io/job-id";
export const RUN_ID_LABEL = "flowsvc.io/run-id";
export const ATTEMPT_ANNOTATION = "flowsvc.io/attempt";
export const ORG_ANNOTATION = "flowsvc.io/org";
export const LAUNCHED_BY_ANNOTATION = "flowsvc.io/launched-by";

export const TOKEN_DIR = "/var/run/flowsvc/job";
export const TOKEN_KEY = "token";
export const SCRATCH_DIR = "/scratch";
/** The agent image's user (contract "Images"). */
export const AGENT_UID = 10001;

/** `job-...` for a job's first dispatch, `job-...-a2` for its second, and so on. */
export const podNameFor = (jobId: string, attempt: number): string => (attempt <= 1 ? jobId : `${jobId}-a${attempt}`);
export const tokenSecretName = (podName: string): string => `${podName}-token`;

export interface AgentPodInput {
  req: LaunchRequest;
  owner: RunOwner;
  settings: AgentPodSettings;
  /** How agent Pods reach ingest (agentServerUrl). */
  serverUrl: string;
  /** The controller that made it (its lease identity), for whoever reads the Pod. */
  launchedBy: string;
}

/** nodeSelector and tolerations of the capabilities the job requires (capabilityScheduling), merged. */
const placement = (
  req: LaunchRequest,
  settings: AgentPodSettings,
): { nodeSelector: Record<string, string>; tolerations: V1Toleration[] } => {
  const nodeSelector: Record<string, string> = {};
  const tolerations: V1Toleration[] = [];
  for (const capability of req.capabilities) {
    const rule = Object.hasOwn(settings.capabilityScheduling, capability) ? settings.capabilityScheduling[capability] : undefined;
    if (!rule) continue;
    Object.assign(nodeSelector, rule.nodeSelector);
    tolerations.push(...rule.tolerations);
  }
  return { nodeSelector, tolerations };
};

const SECURITY = {
  runAsNonRoot: true,
  runAsUser: AGENT_UID,
  runAsGroup: AGENT_UID,
  seccompProfile: { type: "RuntimeDefault" },
} as const;

/** The agent Pod of one dispatch: no token in it (the agent reads FLOW_JOB_TOKEN_FILE from the job's Secret). */
export const agentPod = ({ req, owner, settings, serverUrl, launchedBy }: AgentPodInput): V1Pod => {
  const name = podNameFor(req.jobId, req.attempt);
  const { nodeSelector, tolerations } = placement(req, settings);
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: owner.namespace,
      labels: { ...AGENT_LABELS, [JOB_ID_LABEL]: req.jobId, [RUN_ID_LABEL]: req.runId },
      annotations: { [ATTEMPT_ANNOTATION]: String(req.attempt), [ORG_ANNOTATION]: req.org, [LAUNCHED_BY_ANNOTATION]: launchedBy },
      ownerReferences: [
        { apiVersion: FLOW_RUN_API_VERSION, kind: FLOW_RUN_KIND, name: owner.name, uid: owner.uid, blockOwnerDeletion: false },
      ],
    },
    spec: {
      restartPolicy: "Never",
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 10,
      securityContext: { ...SECURITY, fsGroup: AGENT_UID },
      ...(Object.keys(nodeSelector).length ? { nodeSelector } : {}),
      ...(tolerations.length ? { tolerations } : {}),
      volumes: [
        { name: "job-token", secret: { secretName: tokenSecretName(name), defaultMode: 0o440 } },
        { name: "scratch", emptyDir: {} },
        { name: "tmp", emptyDir: {} },
      ],
      containers: [
        {
          name: "agent",
          image: settings.image,
          imagePullPolicy: settings.imagePullPolicy,
          env: [
            { name: "FLOW_SERVER_URL", value: serverUrl },
            { name: "FLOW_AGENT_ID", value: name },
            { name: "FLOW_AGENT_CAPABILITIES", value: settings.capabilities.join(",") },
            { name: "FLOW_AGENT_WORKDIR", value: SCRATCH_DIR },
            { name: "FLOW_JOB_TOKEN_FILE", value: `${TOKEN_DIR}/${TOKEN_KEY}` },
            { name: "HOME", value: "/tmp" },
          ],
          resources: settings.resources,
          securityContext: { ...SECURITY, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
          volumeMounts: [
            { name: "job-token", mountPath: TOKEN_DIR, readOnly: true },
            { name: "scratch", mountPath: SCRATCH_DIR },
            { name: "tmp", mountPath: "/tmp" },
          ],
        },
      ],
    },
  };
};

/** The job's token Secret, owned by its Pod (deleted with it by the garbage collector). */
export const tokenSecret = (pod: V1Pod, token: string): V1Secret => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: {
    name: tokenSecretName(pod.metadata!.name!),
    namespace: pod.metadata!.namespace!,
    labels: { ...pod.metadata!.labels },
    ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: pod.metadata!.name!, uid: pod.metadata!.uid!, blockOwnerDeletion: false }],
  },
  type: "Opaque",
  immutable: true,
  stringData: { [TOKEN_KEY]: token },
});

/** The dispatch an agent Pod runs, read back from its labels and annotations (a restarted controller adopts it). */
export const dispatchOf = (pod: V1Pod): Omit<LaunchRequest, "token"> | undefined => {
  const labels = pod.metadata?.labels ?? {};
  const annotations = pod.metadata?.annotations ?? {};
  const jobId = labels[JOB_ID_LABEL];
  const runId = labels[RUN_ID_LABEL];
  const namespace = pod.metadata?.namespace;
  const attempt = Number(annotations[ATTEMPT_ANNOTATION]);
  const valid = Boolean(jobId && runId && namespace) && Number.isInteger(attempt) && attempt >= 1;
  return valid
    ? { jobId: jobId!, runId: runId!, attempt, capabilities: [], org: annotations[ORG_ANNOTATION] ?? "", project: namespace! }
    : undefined;
};

/** Waiting reasons of a container whose image will not come (the kubelet keeps backing off). */
const IMAGE_FAILURES = new Set(["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"]);

export type PodState =
  | { state: "pending"; since: number; scheduled: boolean; unschedulable?: string }
  | { state: "cannotStart"; reason: string }
  | { state: "running" }
  | { state: "ended"; exitCode: number | null; reason: string };

/** The first container's status, or an empty one. */
const containerState = (pod: V1Pod): V1ContainerState => pod.status?.containerStatuses?.[0]?.state ?? {};

const endedState = (pod: V1Pod): PodState => {
  const terminated = containerState(pod).terminated;
  const status = pod.status ?? {};
  const reason = status.reason ?? terminated?.reason ?? status.phase ?? "Unknown";
  return { state: "ended", exitCode: terminated ? terminated.exitCode : null, reason };
};

const imageFailure = (pod: V1Pod): string | undefined => {
  const waiting = containerState(pod).waiting;
  if (!waiting?.reason || !IMAGE_FAILURES.has(waiting.reason)) return undefined;
  return `${waiting.reason}: ${waiting.message ?? `image ${pod.spec?.containers[0]?.image ?? "?"} cannot be pulled`}`;
};

/** Why the scheduler left it unscheduled (its PodScheduled=False message), if it said. */
const unschedulableReason = (pod: V1Pod): string | undefined => {
  const scheduled = (pod.status?.conditions ?? []).find((c) => c.type === "PodScheduled");
  if (scheduled?.status !== "False") return undefined;
  return scheduled.message ?? scheduled.reason ?? "Unschedulable";
};

const pendingState = (pod: V1Pod): PodState => {
  const failure = imageFailure(pod);
  if (failure) return { state: "cannotStart", reason: failure };
  const created = pod.metadata?.creationTimestamp;
  const since = created ? new Date(created).getTime() : Date.now();
  const bound = Boolean(pod.spec?.nodeName) || (pod.status?.conditions ?? []).some((c) => c.type === "PodScheduled" && c.status === "True");
  if (bound) return { state: "pending", since, scheduled: true };
  const unschedulable = unschedulableReason(pod);
  return { state: "pending", since, scheduled: false, ...(unschedulable ? { unschedulable } : {}) };
};

/** What a Pod's status says about its agent. */
export const podState = (pod: V1Pod): PodState => {
  switch (pod.status?.phase ?? "Pending") {
    case "Succeeded":
    case "Failed":
    case "Unknown":
      return endedState(pod);
    case "Running":
      return { state: "running" };
    default:
      return pendingState(pod);
  }
};
