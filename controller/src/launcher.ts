/**
 * The Launcher port (shared/ARCHITECTURE.md): how a dispatched job gets an agent. Adapters: local
 * processes (this package; reused across jobs), Kubernetes Pods (later; one per job). A launcher
 * never sees run data: it hands an agent the control plane's URL and the job's token, and the agent
 * claims the rest over HTTP.
 */
export interface LaunchRequest {
  jobId: string;
  runId: string;
  attempt: number;
  token: string;
  capabilities: readonly string[];
}

export interface Launcher {
  /** How many more jobs it can take now. */
  free(): number;
  /** Capabilities its agents advertise; a job is dispatched only when it needs a subset. */
  readonly capabilities: readonly string[];
  launch(req: LaunchRequest): void;
  /** Stops every agent it started. */
  stop(): Promise<void>;
}

export interface LauncherEvents {
  /**
   * The agent of this dispatch ended without reporting its job done (its process exited); the
   * controller requeues the job at once if it was not finished.
   */
  agentExited(req: LaunchRequest, code: number | null, signal: string | null): void;
  /** A slot came free. */
  slotFreed(): void;
}
