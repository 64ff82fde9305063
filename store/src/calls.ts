import type { PoolClient } from "pg";
import {
  CallArgsSchemas,
  FlowError,
  assertEmittable,
  assertSameCall,
  waitDurationMs,
  SCRIPT_WORKFLOW,
  PIPELINE_WORKFLOW,
  describeIssues,
  pickInterpreter,
  trustOf,
  GRAPH_VERSION,
  assertStorableJson,
  CONNECTOR_CHECKS,
  graphDocumentText,
  graphError,
  parseGraph,
  parseGraphText,
  submitCheck,
  type GraphDocument,
  type CallRequest,
  type CallResponse,
} from "@flowsvc/core";
import { evaluateCollect, evaluateWaitAll, getActivityByName, submitActivity } from "./activities.js";
import { getEntryForUpdate, insertEntry, resolveEntry, settleWait, type NewEntry, type WaitEntry } from "./journal-entries.js";
import { grantNext, leaseGranted, releaseLease, requestLease } from "./locks.js";
import { mintId } from "./mint.js";
import { createRun } from "./run-lifecycle.js";
import { evaluateSignalWait } from "./signals.js";
import { emitEvent, lockEventTypeForWait } from "./emit.js";
import { GRAPH_WORKFLOW, insertGraphNodes } from "./graph-runs.js";
import { assertPipeline, runGroupOf } from "@flowsvc/core/pipeline";
import { setupPipelineRun } from "./pipeline-runs.js";
import { substateOf, wakeRun } from "./wake.js";
import { evaluateCall } from "./call-children.js";
import { graphRequirements } from "./credentials.js";
import { getStoredGraph } from "./graphs.js";

interface CallRun {
  id: string;
  project_id: string;
  status: string;
  /** What the run causes (its emits, its spawned children) is as trusted as it is. */
  trusted: boolean;
}

type Kind = keyof typeof CallArgsSchemas;

const parseArgs = <K extends Kind>(kind: K, raw: unknown): ReturnType<(typeof CallArgsSchemas)[K]["parse"]> => {
  const parsed = CallArgsSchemas[kind].safeParse(raw);
  if (!parsed.success) throw new FlowError("invalid_argument", `bad ${kind} call: ${describeIssues(parsed.error.issues)}`);
  return parsed.data as ReturnType<(typeof CallArgsSchemas)[K]["parse"]>;
};

interface NewCall {
  readonly run: CallRun;
  readonly req: CallRequest;
  readonly at: { position: number; kind: string; name: string; ordinal: number };
}

const pending = (deadlineMs?: number, args?: unknown): NewEntry => ({ status: "pending", deadlineMs, args });
const done = (result: unknown): NewEntry => ({ status: "done", result });

/**
 * How each kind of new call is recorded: resolved at once, or pending until something wakes it.
 * A wait's deadline is core's waitDurationMs of its args (a sleep's duration, a wait's timeout).
 */
const CREATORS: Partial<Record<CallRequest["kind"], (tx: PoolClient, c: NewCall) => Promise<NewEntry>>> = {
  sleep: (_tx, { req }) => Promise.resolve(pending(waitDurationMs("sleep", parseArgs("sleep", req.args)), req.args)),
  "wait-signal": (_tx, { req }) => {
    if (req.name.startsWith("event:"))
      throw new FlowError("invalid_argument", `signal names starting "event:" are reserved for event waits: ${req.name}`);
    return Promise.resolve(pending(waitDurationMs("wait-signal", parseArgs("wait-signal", req.args)), req.args));
  },
  "wait-event": async (tx, { run, req }) => {
    const duration = waitDurationMs("wait-event", parseArgs("wait-event", req.args));
    // A waiter that starts after an event fired waits for the next one: remember where the bus
    // was, once no emit of the type is still between its sequence number and its commit. Only
    // events of the run's project and of this type can reach the waiter, so their highest seq is
    // the position (events_project_type serves it; migration 020).
    await lockEventTypeForWait(tx, run.project_id, req.name);
    const { rows } = await tx.query<{ seq: string }>(
      `select coalesce(max(seq), 0) as seq from events where project_id = $1 and type = $2`,
      [run.project_id, req.name],
    );
    return pending(duration, { ...req.args, after_seq: rows[0]!.seq });
  },
  emit: async (tx, { run, req }) => {
    const a = parseArgs("emit", req.args);
    assertEmittable(a.type);
    const res = await emitEvent(tx, {
      projectId: run.project_id,
      type: a.type,
      key: a.key ?? null,
      payload: a.payload ?? null,
      sourceRunId: run.id,
      trusted: trustOf({ by: "run", run }),
    });
    return done({ event_id: res.eventId });
  },
  lock: async (tx, { run, req }) => {
    await requestLease(tx, { projectId: run.project_id, grp: req.name, runId: run.id, position: req.position });
    return pending();
  },
  unlock: async (tx, { run, req }) => {
    await releaseLease(tx, run.project_id, req.name, run.id);
    return done({});
  },
  activity: (tx, c) => submitActivityCall(tx, c),
  "activity-submit": (tx, c) => submitActivityCall(tx, c),
  "activity-collect": async (tx, { run, req }) => {
    if (!(await getActivityByName(tx, run.id, req.name))) {
      throw new FlowError("not_found", `no activity named "${req.name}" was submitted in this run`, {
        hint: "submit it first with flow activity-submit",
      });
    }
    return pending();
  },
  "activity-wait-all": () => Promise.resolve(pending()),
  spawn: async (tx, { run, req }) => done({ run_id: await spawnChild(tx, run, parseArgs("spawn", req.args)) }),
  call: async (tx, { run, req }) =>
    pending(undefined, { ...req.args, child_run_id: await startCallChild(tx, run, parseArgs("call", req.args)) }),
  step: () => {
    throw new FlowError("invalid_argument", "steps are recorded with POST /agent/v1/journal");
  },
};

const submitActivityCall = async (tx: PoolClient, { run, req }: NewCall): Promise<NewEntry> => {
  const kind = req.kind === "activity-submit" ? "activity-submit" : "activity";
  const { argv, requires } = parseArgs(kind, req.args);
  const id = await submitActivity(tx, { runId: run.id, position: req.position, name: req.name, argv, requires });
  return kind === "activity-submit" ? done({ activity_id: id }) : pending();
};

/** Makes the journal entry of a new call. */
const create = async (tx: PoolClient, run: CallRun, req: CallRequest): Promise<WaitEntry> => {
  const creator = CREATORS[req.kind];
  if (!creator) throw new FlowError("invalid_argument", `flow ${req.kind} is not available in this version`);
  const at = { position: req.position, kind: req.kind, name: req.name, ordinal: req.ordinal };
  return insertEntry(tx, run.id, at, await creator(tx, { run, req, at }));
};

/**
 * `flow spawn --as pipeline`: the YAML compiled by core (refusals with line and column), and its
 * workflow group's name for the child's input (empty: a spawn has no --input).
 */
const spawnablePipeline = (source: string): { compiled: ReturnType<typeof assertPipeline>; group: ReturnType<typeof runGroupOf> } => {
  const compiled = assertPipeline(source);
  return { compiled, group: runGroupOf(compiled, {}) };
};

const spawnChild = async (tx: PoolClient, run: CallRun, a: ReturnType<(typeof CallArgsSchemas)["spawn"]["parse"]>): Promise<string> => {
  const spawned = a.as === "pipeline" ? spawnablePipeline(a.source) : undefined;
  const trusted = trustOf({ by: "run", run });
  const res = await createRun(tx, {
    id: mintId("run"),
    projectId: run.project_id,
    ...(spawned
      ? { workflow: PIPELINE_WORKFLOW, source: a.source, interpreter: [] }
      : { workflow: SCRIPT_WORKFLOW, source: a.source, interpreter: pickInterpreter(a.filename) }),
    filename: a.filename,
    env: {},
    tags: a.tags,
    trigger: { type: "spawn", parent: run.id },
    idempotencyKey: null,
    createdBy: null,
    parentRunId: run.id,
    trusted,
  });
  if (spawned) {
    // The child pipeline's jobs as graph nodes, its input empty (a spawn has no --input), in this transaction.
    const { compiled, group } = spawned;
    await insertGraphNodes(tx, res.id, {
      nodes: compiled.graph.nodes.map((n) => ({ id: n.id, type: n.type, ...(n.retry ? { retry: n.retry } : {}) })),
      input: {},
    });
    await setupPipelineRun(tx, { runId: res.id, projectId: run.project_id, pipeline: compiled, group, publicUrl: undefined });
  }
  await emitEvent(tx, {
    projectId: run.project_id,
    type: "spawn",
    key: null,
    payload: { run_id: res.id, parent: run.id },
    sourceRunId: run.id,
    trusted,
    platform: true,
  });
  return res.id;
};

type CallArgs = ReturnType<(typeof CallArgsSchemas)["call"]["parse"]>;

/** The graph a `flow call` names: a one-node graph, the stored graph, or the given document; checked as any submitted graph is. */
const calledGraph = async (
  tx: PoolClient,
  run: CallRun,
  a: CallArgs,
): Promise<{ graph: GraphDocument; source: string; filename: string }> => {
  let doc: unknown;
  let filename = "call.json";
  if (a.node !== undefined) {
    doc = { version: GRAPH_VERSION, nodes: [{ id: "call", type: a.node, config: a.config ?? {} }], edges: [] };
    filename = `node:${a.node}`;
  } else if (a.graph !== undefined) {
    const stored = await getStoredGraph(tx, run.project_id, a.graph);
    if (!stored)
      throw new FlowError("not_found", `flow call: graph ${a.graph} not found`, { hint: "list stored graphs with `flow graph ls`" });
    doc = JSON.parse(stored.source);
    filename = `graph:${stored.name}`;
  } else {
    const parsedText = parseGraphText(a.definition ?? "", CONNECTOR_CHECKS);
    if (!parsedText.ok) throw graphError(parsedText.problems);
    // Checked again below as every called graph is: as a document (a checked graph's retry.backoff_ms is no document key).
    doc = JSON.parse(graphDocumentText(parsedText.graph)) as unknown;
  }
  const parsed = parseGraph(doc, CONNECTOR_CHECKS);
  if (!parsed.ok) throw graphError(parsed.problems);
  const refused = submitCheck(await graphRequirements(tx, run.project_id, parsed.graph));
  if (refused) throw refused;
  return { graph: parsed.graph, source: graphDocumentText(parsed.graph), filename };
};

/** `flow call`: the child graph run (its parent the calling run, as trusted as it), in the call's transaction. */
const startCallChild = async (tx: PoolClient, run: CallRun, a: CallArgs): Promise<string> => {
  const { graph, source, filename } = await calledGraph(tx, run, a);
  const input = assertStorableJson(a.input ?? {}, "input");
  const res = await createRun(tx, {
    id: mintId("run"),
    projectId: run.project_id,
    workflow: GRAPH_WORKFLOW,
    source,
    interpreter: [],
    filename,
    env: {},
    tags: [],
    trigger: { type: "call", parent: run.id },
    idempotencyKey: null,
    createdBy: null,
    parentRunId: run.id,
    trusted: trustOf({ by: "run", run }),
  });
  const nodes = graph.nodes.map((n) => ({ id: n.id, type: n.type, ...(n.retry ? { retry: n.retry } : {}) }));
  await insertGraphNodes(tx, res.id, { nodes, input });
  return res.id;
};

/** Re-checks a pending entry: it may be resolvable now (a queued signal, a free lease, a finished child). */
const evaluate = async (tx: PoolClient, run: CallRun, e: WaitEntry, fresh: boolean): Promise<WaitEntry> => {
  switch (e.kind) {
    case "sleep":
    case "wait-event":
      // core's decideWait: a sleep always parks on its first call, even for 0s (it frees the slot).
      return settleWait(tx, run.id, e, { fresh });
    case "wait-signal":
      return evaluateSignalWait(tx, run.id, e, true);
    case "lock": {
      await grantNext(tx, run.project_id, e.name, run.id);
      const granted = await leaseGranted(tx, run.id, e.position);
      return granted ? resolveEntry(tx, run.id, e.position, { granted_at: granted }) : e;
    }
    case "activity":
    case "activity-collect":
      return evaluateCollect(tx, run.id, e);
    case "activity-wait-all":
      return evaluateWaitAll(tx, run.id, e);
    case "call":
      return evaluateCall(tx, run.id, e);
    default:
      return e;
  }
};

/**
 * A pass claimed while the run was trusted holds the secrets in its script's environment. When an
 * untrusted event resolved a wait of that pass (and took the run's trust), a re-asked call (a lost
 * answer, a server restart) must not hand the event to it: the call answers pending, the agent
 * suspends, and the next pass, claimed without secrets, replays the recorded envelope.
 */
const heldFromEarlierPass = async (tx: PoolClient, run: CallRun, e: WaitEntry): Promise<boolean> => {
  if (run.trusted || e.kind !== "wait-event" || e.status !== "done") return false;
  // A job that replays a resolved wait is queued in the transaction that resolved it (same now()).
  const { rowCount } = await tx.query(
    `select 1 from journal j join jobs b on b.run_id = j.run_id
      where j.run_id = $1 and j.position = $2 and b.kind = 'run' and b.status in ('dispatched', 'running') and b.created_at < j.resolved_at`,
    [run.id, e.position],
  );
  return (rowCount ?? 0) > 0;
};

/**
 * One durable call of a script at its position (docs/internals.md, POST /agent/v1/call). Calls
 * are identified by position: a repeat answers the entry's current state, so a retried request
 * (lost answer, server restart, replay of a still-pending wait) is idempotent.
 */
export const performCall = async (tx: PoolClient, runId: string, req: CallRequest): Promise<CallResponse> => {
  const { rows } = await tx.query<CallRun>(`select id, project_id, status, trusted from runs where id = $1 for update`, [runId]);
  const run = rows[0];
  if (!run) throw new FlowError("not_found", `run ${runId} not found`);
  let entry = await getEntryForUpdate(tx, runId, req.position);
  const fresh = !entry;
  if (entry) assertSameCall(entry, req);
  entry ??= await create(tx, run, req);
  if (entry.status === "pending") entry = await evaluate(tx, run, entry, fresh);
  const at = { position: entry.position, kind: entry.kind, name: entry.name, ordinal: entry.ordinal };
  const held = await heldFromEarlierPass(tx, run, entry);
  // Held: the suspend that follows must requeue the run, not park it on a wait that is already done.
  if (held) await wakeRun(tx, run.id);
  if (entry.status === "done" && !held) return { status: "done", entry: { ...at, status: "done", result: entry.result } };
  return {
    status: "pending",
    entry: { ...at, status: "pending", result: null },
    substate: substateOf(entry),
    deadline: held ? null : (entry.deadline?.toISOString() ?? null),
  };
};
