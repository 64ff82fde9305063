// RunOwners (controller/src/kube/run-owners.ts, the launcher's port) implemented with the FlowRun
// mirror's objects: the FlowRun of a run, created when it does not exist yet, so that an agent Pod
// never waits for the mirror's next pass and always has its owner (ownerReference GC removes the
// Pod with the FlowRun).
import type { Pool } from "pg";
import { FlowError } from "@flowsvc/core";
import { getMirroredRun, type MirroredRun } from "@flowsvc/store";
import type { RunOwner, RunOwners } from "./run-owners.js";
import { RUN_ID_LABEL } from "./pods.js";
import { apiStatus, type FlowApi } from "./reconcile-api.js";
import { FLOWSVC_API_VERSION, FLOW_KINDS, type FlowObject } from "./reconcile-kinds.js";
import type { NamespaceIndex } from "./reconcile-namespaces.js";
import type { FlowRunStatus } from "./flowrun-summary.js";

export type FlowRunObject = FlowObject<Record<string, unknown>, FlowRunStatus>;

/** FlowRuns by the run they mirror: by name label, by status.runId, and by uid (a kubectl-applied FlowRun's run has its uid as idempotency key). */
export class FlowRunIndex {
  readonly byRun = new Map<string, FlowRunObject>();
  readonly byUid = new Map<string, FlowRunObject>();

  constructor(objects: Iterable<FlowRunObject>) {
    for (const o of objects) this.add(o);
  }

  add(o: FlowRunObject): void {
    const runId = o.metadata?.labels?.[RUN_ID_LABEL] ?? o.status?.runId;
    if (runId) this.byRun.set(runId, o);
    if (o.metadata?.uid) this.byUid.set(o.metadata.uid, o);
  }

  find(run: Pick<MirroredRun, "id" | "idempotency_key">): FlowRunObject | undefined {
    return this.byRun.get(run.id) ?? (run.idempotency_key ? this.byUid.get(run.idempotency_key) : undefined);
  }
}

/**
 * The spec of a FlowRun the controller creates for a run: what it runs, never its source (it may be
 * 1 MiB; the run's own copy stays in Postgres, so `source` is empty) or its env.
 */
export const mirrorSpec = (run: MirroredRun): Record<string, unknown> => ({
  kind: "script",
  source: "",
  filename: run.filename,
  interpreter: run.interpreter,
  ...(run.tags.length ? { tags: run.tags } : {}),
});

export const ownerOfObject = (o: FlowRunObject): RunOwner => ({
  namespace: o.metadata!.namespace!,
  name: o.metadata!.name!,
  uid: o.metadata!.uid!,
});

export interface OwnersDeps {
  pool: Pool;
  api: FlowApi;
  namespaces: NamespaceIndex;
  /** The FlowRuns known now (the informer's cache and those created since). */
  index: () => FlowRunIndex;
  /** Told of a FlowRun this process created, before the informer sees it. */
  created: (o: FlowRunObject) => void;
}

export class FlowRunOwners implements RunOwners {
  readonly #pending = new Map<string, Promise<RunOwner>>();

  constructor(private readonly deps: OwnersDeps) {}

  ownerOf(runId: string): Promise<RunOwner> {
    const known = this.deps.index().byRun.get(runId);
    if (known) return Promise.resolve(ownerOfObject(known));
    let p = this.#pending.get(runId);
    if (!p) {
      p = this.#lookUpOrCreate(runId).finally(() => this.#pending.delete(runId));
      this.#pending.set(runId, p);
    }
    return p;
  }

  /** The FlowRun of a run already read from Postgres (the mirror's pass). */
  async ensure(run: MirroredRun): Promise<FlowRunObject> {
    const found = this.deps.index().find(run);
    if (found) return found;
    const namespace = this.deps.namespaces.namespaceOf(run.org, run.project);
    if (!namespace) throw new FlowError("not_found", `run ${run.id} is in ${run.org}/${run.project}, which is no watched namespace`);
    const body: FlowRunObject = {
      apiVersion: FLOWSVC_API_VERSION,
      kind: FLOW_KINDS.run.kind,
      metadata: { name: run.id, namespace, labels: { [RUN_ID_LABEL]: run.id, "app.kubernetes.io/managed-by": "flowsvc" } },
      spec: mirrorSpec(run),
    };
    let made: FlowRunObject | undefined;
    try {
      made = await this.deps.api.create<FlowRunObject>("run", namespace, body);
    } catch (err) {
      if (apiStatus(err) !== 409) throw err;
      made = await this.deps.api.get<FlowRunObject>("run", namespace, run.id);
      if (!made) throw err;
    }
    this.deps.created(made);
    return made;
  }

  async #lookUpOrCreate(runId: string): Promise<RunOwner> {
    const run = await getMirroredRun(this.deps.pool, runId);
    if (!run) throw new FlowError("not_found", `run ${runId} not found`);
    return ownerOfObject(await this.ensure(run));
  }
}
