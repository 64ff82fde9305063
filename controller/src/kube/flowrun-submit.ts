// A FlowRun applied with kubectl (no `flowsvc.io/run-id` label, no status.runId) is a submission:
// its spec is core's RunSubmission (the API's body and rules), and the run is created with the
// FlowRun's metadata.uid as idempotency key, so a resync, a restart or a second replica resolve to
// the same run. As `POST .../runs`, the run is a person's (whoever may create FlowRuns in the
// namespace) and its trigger is recorded on the bus as a `manual` event. The mirror then finds the
// FlowRun by that uid and writes its status (runId first). A spec that breaks a rule gets
// status `invalid` (the STATUS column of `kubectl get flowruns`, FLOWRUN_INVALID_STATUS),
// Succeeded=False/InvalidSpec with the problem as message, and no run.
import type { Pool } from "pg";
import { RunSubmission, assertStorableJson, personSubmittedRun } from "@flowsvc/core";
import { submitRun, withTransaction } from "@flowsvc/store";
import type { FlowApi } from "./reconcile-api.js";
import type { KubeLog } from "./reconcile-log.js";
import type { NamespaceIndex } from "./reconcile-namespaces.js";
import { specProblem } from "./reconcile-config.js";
import { kubeTime } from "./reconcile-kinds.js";
import type { FlowRunObject } from "./flowrun-owners.js";
import { RUN_ID_LABEL } from "./pods.js";

export interface SubmitDeps {
  pool: Pool;
  api: FlowApi;
  log: KubeLog;
  namespaces: NamespaceIndex;
}

/** The status (STATUS column) of a FlowRun whose spec was refused: not a run status, as no run was made. */
export const FLOWRUN_INVALID_STATUS = "invalid";

/** Whether a FlowRun asks to be submitted (one the controller made, or already submitted, does not). */
export const isSubmission = (o: FlowRunObject): boolean => !o.metadata?.labels?.[RUN_ID_LABEL] && !o.status?.runId;

/** Submits a kubectl-applied FlowRun once; answers the run id (an existing one on a repeat). */
export const submitFlowRun = async (deps: SubmitDeps, o: FlowRunObject): Promise<string | undefined> => {
  const namespace = o.metadata!.namespace!;
  const uid = o.metadata!.uid!;
  let body: RunSubmission;
  try {
    body = RunSubmission.parse(assertStorableJson(o.spec ?? {}, "spec"));
  } catch (err) {
    const problem = specProblem(err);
    if (problem === undefined) throw err;
    await refuse(deps, o, problem);
    return undefined;
  }
  await deps.namespaces.ready();
  const scope = await deps.namespaces.project(namespace);
  const sender = `kubernetes:${namespace}/${o.metadata!.name}`;
  // The FlowRun's uid is its idempotency key; nobody's user id: kubectl's caller is not a flowsvc user.
  const run = personSubmittedRun(body, { projectId: scope.projectId, sender, createdBy: null, idempotencyKey: uid });
  const res = await withTransaction(deps.pool, (tx) => submitRun(tx, run, { sender, credentials: body.credentials }));
  if (!res.duplicate) deps.log.info({ runId: res.id, flowRun: `${namespace}/${o.metadata!.name}` }, "FlowRun submitted");
  return res.id;
};

/** Writes a refused FlowRun's status; its transition time stays while it stays refused (a resync writes nothing). */
const refuse = async (deps: SubmitDeps, o: FlowRunObject, problem: string): Promise<void> => {
  const generation = o.metadata?.generation;
  const previous = o.status?.conditions?.find((c) => c.type === "Succeeded");
  const since = previous?.status === "False" && previous.reason === "InvalidSpec" ? previous.lastTransitionTime : undefined;
  await deps.api.patchStatus("run", o.metadata!.namespace!, o.metadata!.name!, {
    status: FLOWRUN_INVALID_STATUS,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    conditions: [
      { type: "Succeeded", status: "False", reason: "InvalidSpec", message: problem, lastTransitionTime: since ?? kubeTime(new Date()) },
    ],
  });
};
