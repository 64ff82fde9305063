/**
 * The NodeContext an executor gets (graph contract): the run, the node's evaluated config, and the
 * three services executors share: credentials resolved at dispatch by core's one resolver, an emit
 * recorded once per (run, node, attempt), and the run's log, masked.
 */
import type { Pool, PoolClient } from "pg";
import type { Dispatcher } from "undici";
import {
  FlowError,
  assertEmittable,
  credentialMaskValues,
  holdingValue,
  shownName,
  trustOf,
  type CredentialKind,
  type GraphNode,
  type GraphScope,
  type ValueMasker,
} from "@flowsvc/core";
import {
  appendLogs,
  createProjectMaskerCache,
  emitEvent,
  findProjectById,
  openProjectHoldings,
  openProjectMasker,
  projectSecretScope,
  recordNodeEmit,
  recordedNodeEmit,
  withTransaction,
  type GraphRunRow,
  type Keyring,
  type NodeResultKeeper,
} from "@flowsvc/store";
import type { ControllerLogger } from "../dispatcher.js";
import type { NodeContext, ResolvedCredential } from "./nodes/types.js";

export interface ContextInput {
  pool: Pool;
  keyring: Keyring;
  logger: ControllerLogger;
  publicUrl: string | undefined;
  /** The egress-guarded dispatcher (NodeContext.egress). */
  egress: Dispatcher;
  run: GraphRunRow;
  node: GraphNode;
  config: unknown;
  scope: GraphScope;
  attempt: number;
  signal: AbortSignal;
  /** The driver's cache of each project's org. */
  orgs: Map<string, string>;
}

/** The root of a run's spawn tree (a graph run started by a node of another run has a parent). */
const rootRunOf = async (pool: Pool, runId: string): Promise<string> => {
  const { rows } = await pool.query<{ id: string }>(
    `with recursive up(id, parent_run_id, depth) as (
       select id, parent_run_id, 0 from runs where id = $1
       union all select r.id, r.parent_run_id, up.depth + 1 from up
         cross join lateral (select r.id, r.parent_run_id from runs r where r.id = up.parent_run_id offset 0) r
        where up.depth < 64)
     select id from up where parent_run_id is null limit 1`,
    [runId],
  );
  return rows[0]?.id ?? runId;
};

/** A credential for an http or connector node: all checks of core's resolver, or a FlowError (the node fails, nothing is sent). */
const resolveCredential = async (
  input: ContextInput,
  orgId: string,
  req: { name: string; kinds: readonly CredentialKind[] | undefined },
): Promise<ResolvedCredential> => {
  const { run } = input;
  if (!run.trusted)
    throw new FlowError(
      "forbidden",
      `the run was started by an untrusted event and gets no credentials, but node ${input.node.id} names ${shownName(req.name)}`,
    );
  // A credential or a connected account (a usable one's token as a bearer value); an account to
  // reconnect, a conflict, a wrong kind or a value that does not open fails the node, nothing sent.
  const holdings = await openProjectHoldings(input.pool, input.keyring, { orgId, projectId: run.project_id }, [req.name]);
  const got = holdingValue(req.name, holdings.get(req.name), req.kinds);
  if (!got.ok) throw new FlowError("invalid_argument", got.problem);
  return { name: req.name, value: got.value, masks: credentialMaskValues(got.value) };
};

/** The run's log masker: the project's secrets and credentials, opened on first use. */
const maskerOf = (input: ContextInput, orgId: string): Promise<ValueMasker> =>
  openProjectMasker(input.pool, input.keyring, { projectId: input.run.project_id, orgId });

/** The org of a run's project, from the driver's cache (filled on first use). */
const orgOfRun = async (deps: { pool: Pool; orgs: Map<string, string> }, run: { id: string; project_id: string }): Promise<string> => {
  const cached = deps.orgs.get(run.project_id);
  if (cached !== undefined) return cached;
  const found = await findProjectById(deps.pool, run.project_id);
  if (!found) throw new FlowError("not_found", `the project of run ${run.id} is gone`);
  deps.orgs.set(run.project_id, found.orgId);
  return found.orgId;
};

/**
 * How the engine stores what it writes of a run (store's NodeResultKeeper): each node's output and
 * error, and the run's own output and error (which the run.* event carries to the bus), masked with
 * every secret and credential of the run's project before they are stored, as a script's are.
 *
 * The opened values are kept per project and reopened only when the project's stamp changed (a
 * digest of every secret's and credential's (name, set_at), one indexed query, nothing opened):
 * a value set through any replica is masked from the next node result on, and a fan-out's hundred
 * results do not open the project's secrets a hundred times. The reads go through the advance's
 * transaction (`tx`): an advance holding a connection never waits for a second one from the pool.
 */
export const createNodeResultKeepers = (deps: {
  keyring: Keyring;
}): ((run: { id: string; project_id: string }, tx: PoolClient) => Promise<NodeResultKeeper>) => {
  const projectMasker = createProjectMaskerCache(deps.keyring);
  return async (run, tx) => {
    const found = await projectSecretScope(tx, run.project_id);
    if (!found) throw new FlowError("not_found", `the project of run ${run.id} is gone`);
    return { masker: await projectMasker(tx, found), keyring: deps.keyring, scope: { orgId: found.orgId, projectId: found.projectId } };
  };
};

/** An emit node's event, once per (run, node, attempt): an attempt run again answers the id recorded the first time. */
const emitOnce = async (input: ContextInput, e: { type: string; payload: unknown; key: string | undefined }): Promise<string> => {
  const key = { runId: input.run.id, nodeId: input.node.id, attempt: input.attempt };
  const recorded = await recordedNodeEmit(input.pool, key);
  if (recorded) return recorded;
  assertEmittable(e.type);
  return withTransaction(input.pool, async (tx) => {
    await tx.query(`select 1 from runs where id = $1 for update`, [input.run.id]);
    const again = await recordedNodeEmit(tx, key);
    if (again) return again;
    const res = await emitEvent(tx, {
      projectId: input.run.project_id,
      type: e.type,
      key: e.key ?? null,
      payload: e.payload ?? null,
      sourceRunId: input.run.id,
      trusted: trustOf({ by: "run", run: input.run }),
    });
    await recordNodeEmit(tx, { ...key, eventId: res.eventId });
    return res.eventId;
  });
};

export const nodeContext = async (input: ContextInput): Promise<NodeContext> => {
  const { run } = input;
  const orgId = await orgOfRun(input, run);
  const project = { orgId };
  let masker: Promise<ValueMasker> | undefined;
  return {
    db: input.pool,
    keyring: input.keyring,
    log: input.logger,
    run: {
      id: run.id,
      orgId: project.orgId,
      projectId: run.project_id,
      rootRunId: run.parent_run_id === null ? run.id : await rootRunOf(input.pool, run.id),
      parentRunId: run.parent_run_id,
      trusted: run.trusted,
      input: run.input ?? {},
      graphName: run.filename.startsWith("graph:") ? run.filename.slice("graph:".length) : null,
    },
    node: input.node,
    config: input.config,
    scope: input.scope,
    attempt: input.attempt,
    publicUrl: input.publicUrl,
    egress: input.egress,
    credential: (name, kinds) => resolveCredential(input, project.orgId, { name, kinds }),
    // Masked before it is stored, as a script's emit is (ingest's maskEmit): the bus, the handler runs and
    // waits it feeds never see a secret a node's output held (a far side that echoed the request).
    emit: async (type, payload, key) => {
      const m = await (masker ??= maskerOf(input, project.orgId));
      return emitOnce(input, { type, payload: m.json(payload), key: key === undefined ? undefined : m.text(key) });
    },
    writeLog: async (text) => {
      masker ??= maskerOf(input, project.orgId);
      const data = (await masker).text(text.endsWith("\n") ? text : `${text}\n`);
      await appendLogs(input.pool, run.id, null, [{ stream: "system", data }]);
    },
    signal: input.signal,
  };
};
