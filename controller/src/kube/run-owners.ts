/**
 * The owner of an agent Pod (contract "Agent Pods"): the FlowRun that mirrors the job's run. The
 * Kubernetes launcher (pod-launcher.ts, H5) asks for it before creating a Pod; the FlowRun mirror
 * (H6) implements it. Types only.
 */

/** Enough of a FlowRun to write an ownerReference to it (apiVersion flowsvc.io/v1alpha1, kind FlowRun). */
export interface RunOwner {
  /** The run's project namespace; the Pod is created in it. */
  namespace: string;
  /** The FlowRun's metadata.name (the run id). */
  name: string;
  /** The FlowRun's metadata.uid. */
  uid: string;
}

export interface RunOwners {
  /**
   * The FlowRun of this run, created first if it does not exist yet (so a Pod never waits on the
   * mirror's next pass). Rejects when the run is unknown or the API server refuses; the launcher then
   * gives the job back without burning an attempt.
   */
  ownerOf(runId: string): Promise<RunOwner>;
}

/** The Pod's ownerReference to its FlowRun: not the controller (controller is unset), never blocking deletion. */
export const FLOW_RUN_API_VERSION = "flowsvc.io/v1alpha1";
export const FLOW_RUN_KIND = "FlowRun";

export const FLOW_RUN_GROUP = "flowsvc.io";
export const FLOW_RUN_VERSION = "v1alpha1";
export const FLOW_RUN_PLURAL = "flowruns";
