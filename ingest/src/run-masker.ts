import type { Pool } from "pg";
import { FlowError, type ValueMasker } from "@flowsvc/core";
import {
  createProjectMaskerCache,
  getRunViewInSecretScope,
  projectSecretScope,
  runSecretScope,
  type GraphNodeView,
  type Keyring,
  type RunView,
  type StampedProject,
} from "@flowsvc/store";

/** A project's secrets as a one-shot masker, with the scope that seals and opens its journal. */
export interface RunMaskScope {
  projectId: string;
  orgId: string;
  masker: ValueMasker;
}

export interface RunMaskers {
  /** The masker of a run's project: every secret value of the project, trusted run or not. */
  forRun(runId: string): Promise<RunMaskScope>;
  forProject(projectId: string): Promise<RunMaskScope>;
  /** A run of the project as the API shows it, masked (maskRunView); the run and the stamp in one statement. */
  runView(projectId: string, runId: string): Promise<RunView | undefined>;
}

/**
 * What a run hands the server (outputs, annotations, emitted payloads, the error text) is masked
 * with every secret and credential of its project before it is stored, and what the API shows is masked again
 * with the current ones (SECURITY.md "Secrets and masking"). An untrusted run was given no
 * secrets and cannot know them, but masking its values too costs one look-up.
 *
 * The opened values are cached per process and project. Each use reads a stamp of the project's
 * secrets (a digest of every (name, set_at), one indexed query, nothing opened) and reopens them
 * only when it changed: a secret set or deleted through any replica is masked from the next call
 * on, with no TTL to wait out and no decryption on the hot path (each in-script emit).
 */
export const createRunMaskers = (pool: Pool, keyring: Keyring): RunMaskers => {
  const projectMasker = createProjectMaskerCache(keyring);
  const maskerOf = (scope: StampedProject): Promise<ValueMasker> => projectMasker(pool, scope);

  const withMasker = async (scope: { projectId: string; orgId: string; stamp: string }): Promise<RunMaskScope> => ({
    projectId: scope.projectId,
    orgId: scope.orgId,
    masker: await maskerOf(scope),
  });

  return {
    async forRun(runId) {
      const scope = await runSecretScope(pool, runId);
      if (!scope) throw new FlowError("not_found", `run ${runId} not found`);
      return withMasker(scope);
    },
    async forProject(projectId) {
      const scope = await projectSecretScope(pool, projectId);
      if (!scope) throw new FlowError("not_found", `project ${projectId} not found`);
      return withMasker(scope);
    },
    async runView(projectId, runId) {
      const found = await getRunViewInSecretScope(pool, projectId, runId);
      return found && maskRunView(await maskerOf(found.scope), found.view);
    },
  };
};

/**
 * A run as the API shows it, masked with the project's current secrets: what the run wrote
 * (output, error, annotations) and what started it (trigger). Values stored before masking, or
 * before a secret was set, never come back in clear.
 */
export const maskRunView = <R extends Pick<RunView, "output" | "error" | "annotations" | "trigger">>(masker: ValueMasker, run: R): R =>
  masker.active
    ? {
        ...run,
        output: masker.json(run.output) as R["output"],
        error: run.error === null ? null : masker.text(run.error),
        annotations: run.annotations.map((a) => ({ ...a, markdown: masker.text(a.markdown) })),
        trigger: Object.fromEntries(
          Object.entries(run.trigger).map(([k, v]) => [k, typeof v === "string" ? masker.text(v) : masker.json(v)]),
        ),
      }
    : run;

/**
 * A graph or pipeline run's nodes as the API shows them: what each node holds (its output, its error,
 * its substate, whose prompt may quote an output) masked; the record's own fields (id, type, status,
 * attempt, times) are the document's and the engine's, never a run's data, and are left as they are
 * (masking them too made a short secret rename `status` to `s***a***us`).
 */
export const maskGraphNodes = <N extends Pick<GraphNodeView, "output" | "error" | "substate">>(masker: ValueMasker, nodes: N[]): N[] =>
  masker.active
    ? nodes.map((n) => ({
        ...n,
        output: masker.json(n.output),
        error: n.error === null ? null : masker.text(n.error),
        substate: n.substate === null ? null : maskSubstate(masker, n.substate),
      }))
    : nodes;

/** A node's substate: its wait's name and kind as they are, every other value (a gate's prompt and fields...) masked. */
const maskSubstate = <S extends NonNullable<GraphNodeView["substate"]>>(masker: ValueMasker, substate: S): S => {
  const { name, kind, ...rest } = substate;
  return { ...(Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, masker.json(v)])) as S), name, kind };
};

/** An event as the API shows it: payload and key masked with the project's current secrets. */
export const maskEventRecord = <E extends { key: string | null; payload?: unknown }>(masker: ValueMasker, e: E): E =>
  masker.active
    ? { ...e, key: e.key === null ? null : masker.text(e.key), ...("payload" in e ? { payload: masker.json(e.payload) } : {}) }
    : e;
