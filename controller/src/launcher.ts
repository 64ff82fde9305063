/**
 * The Launcher port (shared/ARCHITECTURE.md): how a dispatched job gets an agent. Adapters: local
 * processes (local-launcher.ts; reused across jobs) and Kubernetes Pods (kube/pod-launcher.ts; one
 * per job). A launcher never sees run data: it hands an agent the control plane's URL and the job's
 * token, and the agent claims the rest over HTTP.
 */
export interface LaunchRequest {
  jobId: string;
  runId: string;
  attempt: number;
  /** The job's bearer token. A Pod gets it from a per-job Secret, never in its spec. */
  token: string;
  capabilities: readonly string[];
  /** Where the run lives: its org and project names (in Kubernetes, the project is the namespace). */
  org: string;
  project: string;
}

export interface Launcher {
  /** How many more jobs it can take now. */
  free(): number;
  /** Capabilities its agents advertise; a job is dispatched only when it needs a subset. */
  readonly capabilities: readonly string[];
  /**
   * Starts an agent for the job. Asynchronous: it settles when the agent was started (a process
   * spawned, a Pod created), not when it ran. A launch that cannot go ahead (a project at its cap,
   * an API server that refused the Pod) reports `launchFailed` instead of rejecting.
   */
  launch(req: LaunchRequest): Promise<void>;
  /**
   * Re-reads the agents already in flight (a restarted controller adopts the Pods its predecessor
   * created, so nothing is launched twice and the caps count them). Called once, before the first
   * launch; optional for launchers whose agents die with the process.
   */
  adopt?(): Promise<void>;
  /**
   * The lease a job dispatched to this launcher starts with, when starting an agent may take longer
   * than an agent's lease (a Pod waiting for a node or an image): the agent's first claim shortens
   * it to the normal lease. Unset: the dispatcher's leaseMs.
   */
  readonly dispatchLeaseMs?: number;
  /** Stops every agent it started (Pods are left to their jobs: a successor adopts them). */
  stop(): Promise<void>;
}

export interface LaunchFailureOptions {
  tellRun?: boolean;
}

export interface LauncherEvents {
  /**
   * The agent of this dispatch ended without reporting its job done (its process exited, its Pod
   * failed, was evicted or vanished); the controller requeues the job at once if it was not
   * finished. Counts as an attempt.
   */
  agentExited(req: LaunchRequest, code: number | null, signal: string | null): void;
  /**
   * The agent of this dispatch never started (a Pod that was never scheduled within the pending
   * timeout, an image that cannot be pulled, a project at its cap, a refused create, a namespace
   * whose agent NetworkPolicy could not be ensured): the job goes back to the queue without
   * spending an attempt, after `retryAfterMs`. With `tellRun`, the reason is a problem the run's
   * author should see (an operator must act): it goes to the run's log as a system line, once
   * per run and reason.
   */
  launchFailed(req: LaunchRequest, reason: string, retryAfterMs: number, opts?: LaunchFailureOptions): void;
  /** A slot came free. */
  slotFreed(): void;
}
