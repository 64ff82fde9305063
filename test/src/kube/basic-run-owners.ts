/**
 * A RunOwners for the Pod launcher's tests (launcher.test.ts), which run the launcher without the
 * reconcilers: it finds the run's project (the namespace) in Postgres and gets or creates a bare
 * FlowRun named by the run id, with `status.runId` set so it is never taken for a FlowRun to submit.
 * The controller uses the FlowRun mirror's (controller/src/kube/flowrun-mirror.ts).
 */
import type { Pool } from "pg";
import { runPlacements } from "@flowsvc/store";
import {
  FLOW_RUN_API_VERSION,
  FLOW_RUN_GROUP,
  FLOW_RUN_KIND,
  FLOW_RUN_PLURAL,
  FLOW_RUN_VERSION,
  MERGE_PATCH,
  apiStatus,
  type KubeClients,
  type RunOwner,
  type RunOwners,
} from "@flowsvc/controller/kube";

interface KubeObjectMeta {
  metadata?: { name?: string; namespace?: string; uid?: string };
}

export class BasicRunOwners implements RunOwners {
  readonly #pool: Pool;
  readonly #clients: KubeClients;

  constructor(pool: Pool, clients: KubeClients) {
    this.#pool = pool;
    this.#clients = clients;
  }

  async ownerOf(runId: string): Promise<RunOwner> {
    const where = (await runPlacements(this.#pool, [runId])).get(runId);
    if (!where) throw new Error(`run ${runId} does not exist`);
    const namespace = where.project;
    const ref = { group: FLOW_RUN_GROUP, version: FLOW_RUN_VERSION, plural: FLOW_RUN_PLURAL, namespace };
    let obj: KubeObjectMeta;
    try {
      obj = (await this.#clients.custom.getNamespacedCustomObject({ ...ref, name: runId })) as KubeObjectMeta;
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
      const body = {
        apiVersion: FLOW_RUN_API_VERSION,
        kind: FLOW_RUN_KIND,
        metadata: { name: runId, namespace, labels: { "flowsvc.io/run-id": runId } },
        spec: {},
      };
      obj = (await this.#clients.custom.createNamespacedCustomObject({ ...ref, body })) as KubeObjectMeta;
      await this.#clients.custom.patchNamespacedCustomObjectStatus({ ...ref, name: runId, body: { status: { runId } } }, MERGE_PATCH);
    }
    const uid = obj.metadata?.uid;
    if (!uid) throw new Error(`FlowRun ${namespace}/${runId} has no uid`);
    return { namespace, name: runId, uid };
  }
}
