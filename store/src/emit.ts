import { createHash } from "node:crypto";
import type { PoolClient } from "pg";
import {
  evaluateWhen,
  CHAIN_DEPTH_LIMIT,
  FlowError,
  HANDLER_RUNS_IN_FLIGHT_LIMIT,
  PIPELINE_WORKFLOW,
  buildEnvelope,
  celEventVars,
  compileCel,
  derivedId,
  evaluatePredicate,
  matchesAny,
  newRunDefaults,
  trustAfterReceiving,
  trustOf,
  type CompiledCel,
  type Envelope,
  graphDocumentText,
  type GraphDocument,
  type NewRun,
  type Reaction,
  type RunRequest,
  reactionNodeGraph,
  TERMINAL_STATUSES_SQL,
  isTerminalStatus,
} from "@flowsvc/core";
import { assertPipeline, runGroupOf, type CompiledPipeline, type RunGroup } from "@flowsvc/core/pipeline";
import { getStoredGraph } from "./graphs.js";
import { cancelRun } from "./cancel.js";
import { GRAPH_WORKFLOW, insertGraphNodes } from "./graph-runs.js";
import { setupPipelineRun } from "./pipeline-runs.js";
import { resolveEntry } from "./journal-entries.js";
import { mintId } from "./mint.js";
import { createRuns, createdRunsWake } from "./run-lifecycle.js";
import { setRunsCredentials } from "./credentials.js";
import { wakeRun } from "./wake.js";
import { noteStartHint, type StartHint } from "./jobs.js";
import { graphScope } from "./graph-runs.js";

export interface EmitInput {
  projectId: string;
  type: string;
  key: string | null;
  payload: unknown;
  /** Forge scalar fields (sha, ref, repo, sender, ...). */
  fields?: Record<string, unknown>;
  /** The run that emitted it, if any: a custom emit from a handler run chains one generation deeper. */
  sourceRunId: string | null;
  /**
   * `trustOf` (core/src/trust.ts) of what caused it: false for a fork's pull request, an outsider's
   * comment, and whatever an untrusted run emits. Its handler runs, and the runs that wait for it,
   * get no secrets or credentials.
   */
  trusted: boolean;
  hookName?: string;
  /**
   * The rev of the hook the delivery was verified against (IngestHook.rev): the event is recorded
   * only if the hook is still that one, else emitEvents throws StaleHookError.
   */
  hookRev?: string;
  /** A forge delivery id: a redelivery answers the first event, and nothing is delivered twice. */
  deliveryId?: string;
  /**
   * A platform event (`run.*`, `manual`, `spawn`): its recording is part of a state change that
   * must not fail, so over the in-flight limit it is recorded and its handler runs are dropped
   * (reported in `dropped`) instead of failing the emit. Platform events of handler runs are
   * recorded and not delivered at all, so a handler on `run.*` cannot feed itself.
   */
  platform?: boolean;
  /**
   * Where the emitting project is (its org's and project's names): with it, emitToHandlers may hand
   * the emit's new jobs to free agents of the dispatcher (a launch needs the placement).
   */
  placement?: { org: string; project: string };
}

export interface EmitResult {
  eventId: string;
  duplicate: boolean;
  handlerRuns: string[];
  /** Handlers that matched but start no run for this event (its `when` did not evaluate, its stored graph is gone, ...), each with the reason. */
  declined: Array<{ handler: string; error: string }>;
  /** Platform events only: handlers not started because the project had too many in flight. */
  dropped: string[];
  /**
   * With handler runs: the payload of the NOTIFY flowsvc_jobs their insert sent (createdRunsWake of
   * every run the transaction created), for Listener.local in the process that commits it.
   */
  wake?: string;
}

interface HandlerRow {
  name: string;
  patterns: string[];
  when_cel: string | null;
  reaction: Reaction;
  tags: string[];
  credentials: Record<string, string>;
}

/**
 * The hook a delivery was verified against was changed (secret rotated, key replaced, removed)
 * before the event was recorded: nothing was recorded; verify it again against the hook as it is.
 */
export class StaleHookError extends Error {
  constructor(readonly hookName: string) {
    super(`event hook ${hookName} changed while a delivery to it was being recorded`);
    this.name = "StaleHookError";
  }
}

/** Compiled `when` predicates, by source text: compiling is the expensive part of evaluation. */
const compiled = new Map<string, CompiledCel>();
const compileCached = (source: string): CompiledCel => {
  let c = compiled.get(source);
  if (!c) {
    c = compileCel(source, { variables: ["event"] });
    if (compiled.size > 1000) compiled.clear();
    compiled.set(source, c);
  }
  return c;
};

/**
 * A project's handlers as of a revision (projects.handlers_rev, moved on by a trigger on every
 * write to handlers): an emit reads them again only when the revision it sees has moved.
 */
const handlerCache = new Map<string, { rev: string; handlers: HandlerRow[] }>();
const handlersAt = async (tx: PoolClient, projectId: string, rev: string): Promise<HandlerRow[]> => {
  const hit = handlerCache.get(projectId);
  if (hit?.rev === rev) return hit.handlers;
  const { rows } = await tx.query<HandlerRow & { rev: string }>(
    `select h.name, h.patterns, h.when_cel, h.reaction, h.tags, h.credentials, p.handlers_rev as rev
       from projects p left join handlers h on h.project_id = p.id where p.id = $1 order by h.name`,
    [projectId],
  );
  const handlers = rows.filter((r) => r.name !== null);
  // Cached under the revision read with the rows, which may be newer than the one asked for.
  if (handlerCache.size > 10_000) handlerCache.clear();
  if (rows[0]) handlerCache.set(projectId, { rev: rows[0].rev, handlers });
  return handlers;
};

/** A handler run's id derives from (event id, handler name): a replayed emit resolves to the same run. */
export const handlerRunId = (eventId: string, handler: string): string =>
  derivedId("run", createHash("sha256").update(`${eventId}\u0000${handler}`).digest());

/**
 * The lock that orders emits of a type against `flow wait-event` on it. An emit holds it shared
 * from before its event gets a sequence number until commit; a waiter takes it exclusively
 * before it notes where the bus is. So every emit either committed before the waiter looked (the
 * waiter starts after it) or sees the waiter's pending entry and delivers to it: none slips
 * between the two, however the transactions interleave.
 */
const busLockKeys = new Map<string, string>();
export const busLockKey = (projectId: string, type: string): string => {
  const name = `bus\u001f${projectId}\u001f${type}`;
  let key = busLockKeys.get(name);
  if (key === undefined) {
    // A digest per delivery showed in hook ingest's profile: the keys of the types in use are kept.
    key = createHash("sha256").update(name).digest().readBigInt64BE().toString();
    if (busLockKeys.size >= 10_000) busLockKeys.clear();
    busLockKeys.set(name, key);
  }
  return key;
};

/**
 * The start of an emit's transaction, as SQL without parameters (the keys are numbers made here):
 * the bus locks, and generic plans for the prepared insert below (planned for its parameters
 * each time, it spends twice as long planning as running). `set local`, not a connection option,
 * so a pooler such as PgBouncer sees no startup parameter.
 */
const busLocksSql = (inputs: readonly EmitInput[]): string =>
  `set local plan_cache_mode = force_generic_plan; select ${[...new Set(inputs.map((i) => busLockKey(i.projectId, i.type)))]
    .map((k) => `pg_advisory_xact_lock_shared(${k})`)
    .join(", ")}`;

/**
 * emitEvents for GroupCommitter, with the bus locks taken in BEGIN's round trip:
 * `new GroupCommitter(pool, emitBatch.apply, { begin: emitBatch.begin })`.
 */
export const emitBatch = {
  begin: busLocksSql,
  apply: (tx: PoolClient, inputs: readonly EmitInput[]): Promise<EmitResult[]> => emitEvents(tx, inputs, { busLocked: true }),
  alone: (db: PoolClient, inputs: readonly EmitInput[]): Promise<EmitResult[] | undefined> => recordAlone(db, inputs),
};

/** SQLSTATE of flowsvc_record_events_alone's refusal: the batch needs more than its rows (nothing was written). */
const DECLINED_ALONE = "FL001";

/**
 * The project's handler revision at which none of its handlers' patterns takes `type`, as far as
 * this process knows (the cache emitEvents keeps); undefined when one may (or nothing is known).
 */
const revWithoutHandlersFor = (projectId: string, type: string): string | undefined => {
  const known = handlerCache.get(projectId);
  return known && !known.handlers.some((h) => matchesAny(h.patterns, type)) ? known.rev : undefined;
};

/**
 * Hook ingest's common case in one round trip, on a connection in autocommit: deliveries from
 * outside (no source run, not platform events) into projects where no handler takes their type
 * are recorded, and committed, by one call of flowsvc_record_events_alone (migration 019), which
 * declines (writing nothing) when a waiter is parked, a run would be cancelled, the handlers or a
 * hook changed, or a delivery id repeats. Answers undefined when the batch must go through
 * emitEvents in a transaction instead.
 */
export const recordAlone = async (db: PoolClient, inputs: readonly EmitInput[]): Promise<EmitResult[] | undefined> => {
  const revs: string[] = [];
  for (const i of inputs) {
    const rev = i.sourceRunId === null && !i.platform ? revWithoutHandlersFor(i.projectId, i.type) : undefined;
    if (rev === undefined) return undefined;
    revs.push(rev);
  }
  const { payloads, fields } = storableJson(inputs);
  const ids = inputs.map(() => mintId("evt"));
  const col = <T>(f: (i: EmitInput) => T): T[] => inputs.map(f);
  try {
    await db.query(`select flowsvc_record_events_alone($1::bigint[], $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::uuid[], $12::bigint[])`, [
      [...new Set(inputs.map((i) => busLockKey(i.projectId, i.type)))],
      ids,
      col((i) => i.projectId),
      col((i) => i.type),
      col((i) => i.key),
      payloads,
      fields,
      col((i) => i.hookName ?? null),
      col((i) => i.deliveryId ?? null),
      col((i) => i.trusted),
      col((i) => i.hookRev ?? null),
      revs,
    ]);
  } catch (err) {
    if ((err as { code?: string }).code === DECLINED_ALONE) return undefined;
    throw err;
  }
  return ids.map((eventId) => ({ eventId, duplicate: false, handlerRuns: [], declined: [], dropped: [] }));
};

/** `flow wait-event`: called in the waiter's transaction before it reads the bus position. */
export const lockEventTypeForWait = async (tx: PoolClient, projectId: string, type: string): Promise<void> => {
  await tx.query(`select pg_advisory_xact_lock($1::bigint)`, [busLockKey(projectId, type)]);
};

interface Recorded {
  id: string;
  /** Null when nothing was inserted: a redelivery. */
  seq: string | null;
  hook_ok: boolean;
  from_handler: boolean;
  generation: number;
  has_waiters: boolean;
  /** A live run of the project lists the type in its cancel_on (runs_cancel_on_live serves the probe): cancelOnEvents looks closer. */
  has_cancel_on: boolean;
  handlers_rev: string;
}

/**
 * One emit: the event row and every delivery it causes, in the caller's transaction, so a crash
 * before commit loses nothing that was acknowledged and delivers nothing that was not recorded.
 */
export const emitEvent = async (tx: PoolClient, input: EmitInput): Promise<EmitResult> => (await emitEvents(tx, [input]))[0]!;

/**
 * A batch of emits in the caller's transaction (hook ingest commits deliveries in groups), one
 * result per input, in order. Every matching handler gets a run; every parked `flow wait-event`
 * of the type gets the envelope. The common case (no waiter, handlers unchanged) costs two
 * statements however many events the batch holds. One input over a limit throws for the batch:
 * GroupCommitter then retries the inputs one by one, so only that one fails.
 */
export const emitEvents = async (
  tx: PoolClient,
  inputs: readonly EmitInput[],
  opts: { busLocked?: boolean } = {},
): Promise<EmitResult[]> => {
  if (inputs.length === 0) return [];
  const ids = inputs.map(() => mintId("evt"));
  if (!opts.busLocked) await tx.query(busLocksSql(inputs));
  const recorded = await recordEvents(tx, inputs, ids);
  const results: EmitResult[] = [];
  const deliveries: Delivery[] = [];
  const firstOfDelivery = new Map<string, string>();
  const duplicates: number[] = [];
  for (const [i, input] of inputs.entries()) {
    const r = recorded[i]!;
    if (r.seq === null) {
      duplicates.push(i);
      results.push({ eventId: "", duplicate: true, handlerRuns: [], declined: [], dropped: [] });
      continue;
    }
    if (input.deliveryId !== undefined) firstOfDelivery.set(deliveryKey(input), r.id);
    results.push({ eventId: r.id, duplicate: false, handlerRuns: [], declined: [], dropped: [] });
    const delivery = deliveryOf(i, input, r);
    if (delivery) deliveries.push(delivery);
  }
  if (duplicates.length > 0) await answerDuplicates(tx, { inputs, duplicates, results, inBatch: firstOfDelivery });
  await startHandlerRuns(tx, deliveries, results);
  for (const d of deliveries) if (d.hasWaiters) await deliverToWaiters(tx, d.input, d.eventId, d.envelope);
  await cancelOnEvents(tx, deliveries);
  return results;
};

/**
 * `cancel_on: [types]` (spec "Subjects"): a live run that lists the event's type is cancelled when
 * the subjects match (an unkeyed event reaches every such run; a keyed one only runs without a
 * subject or with the same). One statement for the deliveries whose insert saw such a run (has_cancel_on),
 * none when no live run of their projects declares their types (the common case).
 */
const cancelOnEvents = async (tx: PoolClient, all: readonly Delivery[]): Promise<void> => {
  const deliveries = all.filter((d) => d.hasCancelOn);
  if (deliveries.length === 0) return;
  const { rows } = await tx.query<{ id: string; type: string }>(
    // Each project's live runs that declare cancel_on, by runs_cancel_on_live (a lateral subquery fenced by
    // `offset 0`): as a join, the generic plan made while runs is small hashed a scan of every run.
    `select distinct on (r.id) r.id, d.type from unnest($1::text[], $2::text[], $3::text[]) as d(project_id, type, key)
       cross join lateral (select r.id, r.cancel_on, r.trigger from runs r
                            where r.project_id = d.project_id and r.cancel_on is not null and r.status not in (${TERMINAL_STATUSES_SQL}) offset 0) r
      where d.type = any(r.cancel_on) and (d.key is null or r.trigger->>'key' is null or r.trigger->>'key' = d.key)
      order by r.id`,
    [deliveries.map((d) => d.input.projectId), deliveries.map((d) => d.input.type), deliveries.map((d) => d.input.key)],
  );
  for (const r of rows) {
    const { rows: live } = await tx.query<{ status: string }>(`select status from runs where id = $1 for update`, [r.id]);
    if (live[0] && !isTerminalStatus(live[0].status)) await cancelRun(tx, r.id, `cancel_on: an event of type ${r.type} arrived`, undefined);
  }
};

/**
 * What a recorded event delivers: to handlers and waiters, one generation deeper than the run
 * that emitted it (over the chain limit, the batch fails). Undefined for a handler run's own
 * platform event: recorded, never delivered, so a handler on run.* cannot feed itself.
 */
const deliveryOf = (index: number, input: EmitInput, r: Recorded): Delivery | undefined => {
  const generation = input.platform ? 0 : r.generation;
  if (generation >= CHAIN_DEPTH_LIMIT) {
    throw new FlowError(
      "limit_exceeded",
      `this emit would start generation ${generation + 1} of a handler chain; chains stop at ${CHAIN_DEPTH_LIMIT} generations, and nothing was recorded or delivered`,
    );
  }
  if (input.platform && r.from_handler) return undefined;
  const envelope = buildEnvelope({
    id: r.id,
    type: input.type,
    key: input.key,
    payload: input.payload,
    ...(input.fields ? { fields: input.fields } : {}),
  });
  return {
    index,
    input,
    eventId: r.id,
    generation,
    envelope,
    hasWaiters: r.has_waiters,
    hasCancelOn: r.has_cancel_on,
    rev: r.handlers_rev,
  };
};

const deliveryKey = (i: EmitInput): string => `${i.projectId}\u001f${i.hookName ?? ""}\u001f${i.deliveryId ?? ""}`;

/**
 * Inserts every event in one statement. A forge redelivery (same hook and delivery id) inserts
 * nothing and comes back with a null seq. Each row also brings what delivery needs: the
 * generation of the run that emitted it, whether waiters of its type are parked, and the
 * project's handler revision.
 */
/** The events' payloads and fields as JSON text; Postgres's jsonb cannot hold U+0000: say so, for every way onto the bus, instead of failing in the insert. */
const storableJson = (inputs: readonly EmitInput[]): { payloads: string[]; fields: Array<string | null> } => {
  const payloads = inputs.map((i) => JSON.stringify(i.payload ?? null));
  const fields = inputs.map((i) => (i.fields ? JSON.stringify(i.fields) : null));
  if ([...payloads, ...fields].some((j) => j?.includes("\\u0000"))) {
    throw new FlowError(
      "invalid_argument",
      "the event contains NUL characters (\\u0000), which the event bus cannot store; nothing was recorded",
    );
  }
  return { payloads, fields };
};

const recordEvents = async (tx: PoolClient, inputs: readonly EmitInput[], ids: readonly string[]): Promise<Recorded[]> => {
  const col = <T>(f: (i: EmitInput) => T): T[] => inputs.map(f);
  const { payloads, fields } = storableJson(inputs);
  // Run with its generic plan (busLocksSql), prepared once per connection like every statement (pool.ts).
  // The source run is a scalar subquery by primary key: as a join, the generic plan (made while runs
  // is small, as on a new server) was a hash join over a scan of every run, once per event. For the
  // same reason the project is a lateral lookup by primary key (fenced by `offset 0`; a plain join
  // hashed every project), and the waiters' probe is fenced too: unfenced, the generic plan made it a
  // hashed subplan over every pending `wait-event` of every project (each waiter's run is by primary
  // key, as in migration 023's probe), and the hook's probe a hashed scan of every project's hooks
  // (generic-plans.test.ts).
  const { rows } = await tx.query<Recorded>(
    `with input as (
       select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bool[], $11::bool[], $12::uuid[])
         with ordinality as t(id, project_id, type, key, payload, source_run_id, fields, hook_name, delivery_id, trusted, platform, hook_rev, ord)
     ),
     current as (
       select i.id, i.hook_rev is null or exists (
                select 1 from event_hooks h where h.project_id = i.project_id and h.name = i.hook_name and h.rev = i.hook_rev offset 0) as hook_ok
         from input i
     ),
     src as (
       select h.id, h.generation is not null as from_handler, coalesce(h.generation, 0) as generation
         from (select i.id, (select r.generation from runs r where r.id = i.source_run_id and r.handler_name is not null) as generation
                 from input i) h
     ),
     ins as (
       insert into events (id, project_id, type, key, payload, source_run_id, generation, fields, hook_name, delivery_id, trusted)
       select i.id, i.project_id, i.type, i.key, i.payload::jsonb, i.source_run_id,
              case when i.platform then 0 else s.generation end, i.fields::jsonb, i.hook_name, i.delivery_id, i.trusted
         from input i join src s on s.id = i.id join current c on c.id = i.id where c.hook_ok order by i.ord
       on conflict (project_id, hook_name, delivery_id) where delivery_id is not null do nothing
       returning id, seq
     )
     select i.id, ins.seq, c.hook_ok, s.from_handler, s.generation, p.handlers_rev,
            exists (select 1 from journal j
                     where j.kind = 'wait-event' and j.name = i.type and j.status = 'pending'
                       and (select r.project_id from runs r where r.id = j.run_id) = i.project_id offset 0) as has_waiters,
            exists (select 1 from runs r
                     where r.project_id = i.project_id and r.cancel_on is not null and r.status not in (${TERMINAL_STATUSES_SQL})
                       and i.type = any(r.cancel_on)) as has_cancel_on
       from input i join src s on s.id = i.id join current c on c.id = i.id
            cross join lateral (select p.handlers_rev from projects p where p.id = i.project_id offset 0) p
            left join ins on ins.id = i.id
      order by i.ord`,
    [
      ids,
      col((i) => i.projectId),
      col((i) => i.type),
      col((i) => i.key),
      payloads,
      col((i) => i.sourceRunId),
      fields,
      col((i) => i.hookName ?? null),
      col((i) => i.deliveryId ?? null),
      col((i) => i.trusted),
      col((i) => i.platform === true),
      col((i) => i.hookRev ?? null),
    ],
  );
  if (rows.length !== inputs.length) throw new FlowError("not_found", "an event was emitted into a project that does not exist");
  const stale = rows.findIndex((r) => !r.hook_ok);
  if (stale >= 0) throw new StaleHookError(inputs[stale]!.hookName ?? "");
  return rows;
};

/** A redelivery answers the event of the first delivery, recorded earlier or earlier in this batch. */
const answerDuplicates = async (
  tx: PoolClient,
  {
    inputs,
    duplicates,
    results,
    inBatch,
  }: { inputs: readonly EmitInput[]; duplicates: readonly number[]; results: EmitResult[]; inBatch: ReadonlyMap<string, string> },
): Promise<void> => {
  const missing = duplicates.filter((i) => !inBatch.has(deliveryKey(inputs[i]!)));
  const found = new Map<string, string>();
  if (missing.length > 0) {
    const { rows } = await tx.query<{ id: string; project_id: string; hook_name: string; delivery_id: string }>(
      // Each delivery by events_delivery (a lateral subquery fenced by `offset 0`): as a join, the generic
      // plan made while events is small hashed a scan of every event.
      `select e.id, d.project_id, d.hook_name, d.delivery_id from unnest($1::text[], $2::text[], $3::text[]) as d(project_id, hook_name, delivery_id)
         cross join lateral (select e.id from events e
                              where e.project_id = d.project_id and e.hook_name = d.hook_name and e.delivery_id = d.delivery_id
                                and e.delivery_id is not null offset 0) e`,
      [
        missing.map((i) => inputs[i]!.projectId),
        missing.map((i) => inputs[i]!.hookName ?? null),
        missing.map((i) => inputs[i]!.deliveryId ?? null),
      ],
    );
    for (const r of rows) found.set(`${r.project_id}\u001f${r.hook_name}\u001f${r.delivery_id}`, r.id);
  }
  for (const i of duplicates) {
    const key = deliveryKey(inputs[i]!);
    const id = inBatch.get(key) ?? found.get(key);
    if (id === undefined)
      throw new FlowError("internal", `delivery ${inputs[i]!.deliveryId} conflicted with an event that cannot be found`);
    results[i] = { eventId: id, duplicate: true, handlerRuns: [], declined: [], dropped: [] };
  }
};

interface Delivery {
  /** Where its input (and result) is in the batch. */
  index: number;
  input: EmitInput;
  eventId: string;
  generation: number;
  envelope: Envelope;
  hasWaiters: boolean;
  /** Recorded's has_cancel_on. */
  hasCancelOn: boolean;
  rev: string;
}

/** The handlers an event goes to: pattern, trust, then `when` (an evaluation error declines, reported). */
const chooseHandlers = (handlers: readonly HandlerRow[], d: Delivery, declined: EmitResult["declined"]): HandlerRow[] => {
  const chosen: HandlerRow[] = [];
  for (const h of handlers) {
    if (!matchesAny(h.patterns, d.input.type)) continue;
    // Handlers registered with --credential do not serve untrusted deliveries.
    if (!d.input.trusted && Object.keys(h.credentials).length > 0) continue;
    if (h.when_cel) {
      const r = evaluatePredicate(compileCached(h.when_cel), celEventVars(d.envelope));
      if (r.error) declined.push({ handler: h.name, error: r.error });
      if (!r.matched) continue;
    }
    chosen.push(h);
  }
  return chosen;
};

/** The handler runs an emit wants, planned before any is inserted. */
interface PlannedDelivery {
  d: Delivery;
  handlers: HandlerRow[];
  result: EmitResult;
}

const planHandlerRuns = async (tx: PoolClient, deliveries: readonly Delivery[], results: EmitResult[]): Promise<PlannedDelivery[]> => {
  const planned: PlannedDelivery[] = [];
  for (const d of deliveries) {
    const handlers = await handlersAt(tx, d.input.projectId, d.rev);
    if (handlers.length === 0) continue;
    const result = results[d.index]!;
    const chosen = chooseHandlers(handlers, d, result.declined);
    if (chosen.length > 0) planned.push({ d, handlers: chosen, result });
  }
  return planned;
};

/** What a graph-shaped reaction runs: the graph, and for a pipeline the compiled pipeline (its YAML is the run's source). */
interface ReactionGraph {
  graph: GraphDocument;
  filename: string;
  pipeline?: { compiled: CompiledPipeline; source: string };
}

/** The graph a handler's reaction runs (undefined for a script), or why it cannot run now. */
const reactionGraph = async (tx: PoolClient, projectId: string, r: Reaction): Promise<ReactionGraph | { error: string } | undefined> => {
  switch (r.kind) {
    case "script":
      return undefined;
    case "node":
      return { graph: reactionNodeGraph(r), filename: `node:${r.type}` };
    case "pipeline":
      // The snapshot compiled when the handler was set; compiled again here (the compiler is pure).
      try {
        const p = assertPipeline(r.source);
        return { graph: p.graph, filename: r.filename, pipeline: { compiled: p, source: r.source } };
      } catch (err) {
        return { error: err instanceof Error ? err.message : String(err) };
      }
    case "graph": {
      const stored = await getStoredGraph(tx, projectId, r.graph);
      return stored ? { graph: stored.document, filename: `graph:${r.graph}` } : { error: `the stored graph ${r.graph} does not exist` };
    }
  }
};

/** One handler run to start: its request, and for a graph-shaped reaction the graph and its input (the envelope). */
interface PlannedRun {
  index: number;
  request: RunRequest;
  graph: GraphDocument | undefined;
  envelope: Envelope;
  /** A pipeline reaction: the compiled pipeline and its workflow group's name for this event. */
  pipeline: { compiled: CompiledPipeline; group: RunGroup | undefined } | undefined;
}

/** The run a handler starts for a delivery: core's defaults for handler runs, as trusted as the event, its subject the event's key. */
const handlerRunRequest = (d: Delivery, h: HandlerRow, graph: ReactionGraph | undefined): RunRequest => ({
  id: handlerRunId(d.eventId, h.name),
  projectId: d.input.projectId,
  ...(graph?.pipeline
    ? { workflow: PIPELINE_WORKFLOW, source: graph.pipeline.source, filename: graph.filename }
    : graph
      ? { workflow: GRAPH_WORKFLOW, source: graphDocumentText(graph.graph), filename: graph.filename }
      : {
          source: h.reaction.kind === "script" ? h.reaction.source : "",
          filename: h.reaction.kind === "script" ? h.reaction.filename : "",
        }),
  tags: h.tags,
  trigger: { type: d.input.type, event: d.eventId, ...(d.input.key ? { key: d.input.key } : {}), ...(d.input.fields ?? {}) },
  trusted: trustOf({ by: "event", event: d.input }),
  handler: { name: h.name, eventId: d.eventId, generation: d.generation + 1 },
});

/** A pipeline reaction's workflow group for this delivery (its holes read the envelope as `input`), or why it has none. */
const pipelineOfDelivery = (g: ReactionGraph | undefined, d: Delivery): PlannedRun["pipeline"] | { error: string } => {
  if (!g?.pipeline) return undefined;
  try {
    return { compiled: g.pipeline.compiled, group: runGroupOf(g.pipeline.compiled, d.envelope) };
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
};

/**
 * Every handler run of the planned deliveries; a reaction that cannot run (its stored graph is
 * gone, its pipeline's concurrency group does not evaluate for this event) is declined, reported.
 */
const planRuns = async (tx: PoolClient, planned: Awaited<ReturnType<typeof planHandlerRuns>>): Promise<PlannedRun[]> => {
  const runs: PlannedRun[] = [];
  for (const { d, handlers, result } of planned)
    for (const h of handlers) {
      const g = await reactionGraph(tx, d.input.projectId, h.reaction);
      if (g && "error" in g) {
        result.declined.push({ handler: h.name, error: g.error });
        continue;
      }
      const pipeline = pipelineOfDelivery(g, d);
      if (pipeline && "error" in pipeline) {
        result.declined.push({ handler: h.name, error: pipeline.error });
        continue;
      }
      runs.push({ index: d.index, request: handlerRunRequest(d, h, g), graph: g?.graph, envelope: d.envelope, pipeline });
    }
  return runs;
};

/**
 * Starts a run per (event, matching handler), all in one statement (createRuns), within the
 * project's limit on handler runs in flight: over it, an outside emit fails (nothing recorded)
 * and a platform event is recorded with its handler runs dropped. A graph-shaped reaction's run
 * gets its nodes and its input (the event's envelope) in the same transaction.
 */
const startHandlerRuns = async (tx: PoolClient, deliveries: readonly Delivery[], results: EmitResult[]): Promise<void> => {
  const planned = await planHandlerRuns(tx, deliveries, results);
  if (planned.length === 0) return;
  const requests = await planRuns(tx, planned);
  const { created, overLimit } = await createRuns(
    tx,
    requests.map((r) => r.request),
  );
  for (const { d, handlers, result } of planned) {
    const n = overLimit.get(d.input.projectId);
    if (n === undefined) continue;
    // Over the limit: nothing of this project was started.
    if (d.input.platform) {
      result.dropped = handlers.map((h) => h.name);
      continue;
    }
    throw new FlowError(
      "limit_exceeded",
      `${n} handler runs are in flight in this project (at most ${HANDLER_RUNS_IN_FLIGHT_LIMIT}); the event was not recorded or delivered`,
      {
        hint: "retry when the backlog drains (flow runs ls --status running)",
      },
    );
  }
  const wake = createdRunsWake(created);
  for (const r of requests)
    if (created.has(r.request.id)) {
      results[r.index]!.handlerRuns.push(r.request.id);
      results[r.index]!.wake = wake;
    }
  for (const r of requests)
    if (r.graph && created.has(r.request.id)) {
      const nodes = r.graph.nodes.map((n) => ({ id: n.id, type: n.type, ...(n.retry ? { retry: n.retry } : {}) }));
      await insertGraphNodes(tx, r.request.id, { nodes, input: r.envelope });
      if (r.pipeline) {
        const { compiled, group } = r.pipeline;
        await setupPipelineRun(tx, {
          runId: r.request.id,
          projectId: r.request.projectId,
          pipeline: compiled,
          group,
          publicUrl: undefined,
        });
      }
    }
  // A handler's `--credential` map is declared by each run it starts, resolved at claim (store/src/credentials.ts).
  const declaring = planned.flatMap(({ d, handlers }) =>
    handlers.map((h) => ({ runId: handlerRunId(d.eventId, h.name), declared: h.credentials })),
  );
  await setRunsCredentials(
    tx,
    declaring.filter((r) => created.has(r.runId)),
  );
};

/**
 * A free agent of the process that commits an emit, held for one of the emit's new jobs until the
 * job is launched or the slot released (controller's Dispatcher.reserve).
 */
export interface DispatchSlot {
  /** The digest of the job's token, stored with the job; the token itself stays with the dispatcher. */
  readonly digest: Buffer;
  /** The lease the dispatched job starts with. */
  readonly leaseMs: number;
  /** After commit: the job (attempt 1) goes to the agent. */
  launch(job: { jobId: string; runId: string; org: string; project: string }): void;
  /** The job was not written as dispatched: the slot is free again. */
  release(): void;
}

/** The dispatcher of the process that commits an emit, as the emit sees it (Dispatcher in `flow server`). */
export interface DispatchSlots {
  /** A free slot for a job that needs `capabilities`; undefined when there is none, and the job is queued as usual. */
  reserve(capabilities: readonly string[]): DispatchSlot | undefined;
}

/** A handler run planned for flowsvc_emit_to_handlers: its emit's place in the batch, the run, its handler's declared credentials. */
interface DirectRun {
  index: number;
  run: NewRun;
  credentials: Readonly<Record<string, string>>;
}

/**
 * The handler runs a batch of user emits starts, planned from each project's handlers as cached at
 * its revision, as startHandlerRuns plans them (pattern, trust, `when`; a `when` that cannot be
 * evaluated declines, reported in `results`); undefined when an emit needs the transactional way:
 * not a person's emit, no handlers cached for its project, a reaction other than a script.
 */
const planDirect = (inputs: readonly EmitInput[], results: readonly EmitResult[]): DirectRun[] | undefined => {
  const runs: DirectRun[] = [];
  for (const [index, input] of inputs.entries()) {
    const known = handlerCache.get(input.projectId);
    if (
      !known ||
      input.sourceRunId !== null ||
      input.platform ||
      input.fields ||
      input.hookName !== undefined ||
      input.deliveryId !== undefined
    )
      return undefined;
    const result = results[index]!;
    const envelope = buildEnvelope({ id: result.eventId, type: input.type, key: input.key, payload: input.payload });
    const d: Delivery = {
      index,
      input,
      eventId: result.eventId,
      generation: 0,
      envelope,
      hasWaiters: false,
      hasCancelOn: false,
      rev: known.rev,
    };
    for (const h of chooseHandlers(known.handlers, d, result.declined)) {
      if (h.reaction.kind !== "script") return undefined;
      runs.push({ index, run: newRunDefaults(handlerRunRequest(d, h, undefined)), credentials: h.credentials });
    }
  }
  return runs;
};

/** What a start hint (jobs.ts) keeps of a run this emit wrote: the fields of its `run.started` event. */
const startHintRun = (run: NewRun): StartHint["run"] => ({
  id: run.id,
  project_id: run.projectId,
  workflow: run.workflow,
  tags: run.tags,
  trigger: run.trigger,
  trusted: run.trusted,
});

/** flowsvc_emit_to_handlers's runs (migration 022): createRuns's columns, the declared credentials, the job and its dispatch. */
const directRunsJson = (runs: ReadonlyArray<DirectRun & { jobId: string; slot: DispatchSlot | undefined }>): string =>
  JSON.stringify(
    runs.map(({ run, credentials, jobId, slot }) => ({
      id: run.id,
      project_id: run.projectId,
      workflow: run.workflow,
      source: run.source,
      filename: run.filename,
      interpreter: run.interpreter,
      env: run.env,
      tags: run.tags,
      trigger: run.trigger,
      created_by: run.createdBy,
      trusted: run.trusted,
      handler_name: run.handlerName,
      event_id: run.eventId,
      generation: run.generation,
      credentials,
      job_id: jobId,
      capabilities: run.capabilities,
      digest: slot ? slot.digest.toString("hex") : null,
      lease_ms: slot ? slot.leaseMs : null,
    })),
  );

/**
 * A batch of people's emits (`POST {scoped}/events`) in one round trip, its commit included, when
 * it can be: flowsvc_emit_to_handlers (migration 022) records the events and starts the script
 * handler runs planned here (planDirect), and each new job that `slots` has a free agent for is
 * written dispatched to it and launched once committed, with no wake and no dispatcher claim in
 * between. A job without a slot is queued, and `wake` says so, as emitEvents's. Answers undefined,
 * having written nothing, when the batch needs emitEvents in a transaction (for GroupCommitter's
 * `alone`).
 */
export const emitToHandlers = async (
  db: PoolClient,
  inputs: readonly EmitInput[],
  slots?: DispatchSlots,
): Promise<EmitResult[] | undefined> => {
  const results: EmitResult[] = inputs.map(() => ({
    eventId: mintId("evt"),
    duplicate: false,
    handlerRuns: [],
    declined: [],
    dropped: [],
  }));
  const planned = planDirect(inputs, results);
  if (!planned) return undefined;
  const { payloads } = storableJson(inputs);
  const runs = planned.map((p) => {
    const placed = inputs[p.index]!.placement;
    return { ...p, jobId: mintId("job"), slot: placed ? slots?.reserve(p.run.capabilities) : undefined };
  });
  const col = <T>(f: (i: EmitInput) => T): T[] => inputs.map(f);
  try {
    await db.query(`select flowsvc_emit_to_handlers($1::bigint[], $2, $3, $4, $5, $6, $7, $8::bigint[], $9::jsonb, $10)`, [
      [...new Set(inputs.map((i) => busLockKey(i.projectId, i.type)))],
      results.map((r) => r.eventId),
      col((i) => i.projectId),
      col((i) => i.type),
      col((i) => i.key),
      payloads,
      col((i) => i.trusted),
      col((i) => handlerCache.get(i.projectId)!.rev),
      directRunsJson(runs),
      HANDLER_RUNS_IN_FLIGHT_LIMIT,
    ]);
  } catch (err) {
    for (const r of runs) r.slot?.release();
    if ((err as { code?: string }).code === DECLINED_ALONE) return undefined;
    throw err;
  }
  const wake = runs.some((r) => !r.slot) ? createdRunsWake(runs.map((r) => r.run.id)) : undefined;
  for (const { index, run, credentials, jobId, slot } of runs) {
    const result = results[index]!;
    result.handlerRuns.push(run.id);
    if (wake !== undefined) result.wake = wake;
    if (!slot) continue;
    const placement = inputs[index]!.placement!;
    // Its claim may start it in the claim's own statement (claimByToken): no credentials to resolve first.
    if (Object.keys(credentials).length === 0) noteStartHint(slot.digest, { run: startHintRun(run), ...placement });
    slot.launch({ jobId, runId: run.id, ...placement });
  }
  return results;
};

/**
 * `flow wait-event <type>`: every parked waiter of the type that began before this event gets the
 * envelope. A keyed event reaches a run only when the run has no subject or the same one. An
 * untrusted event makes each run it reaches untrusted, in the transaction that resolves the wait.
 */
/** A graph event node's bare-CEL `when` over the arriving envelope (and the run's input and nodes): true only for `true`. */
const graphWaitAccepts = async (tx: PoolClient, runId: string, when: string, envelope: Envelope): Promise<boolean> =>
  evaluateWhen(when, await graphScope(tx, runId), envelope).matched;

const deliverToWaiters = async (tx: PoolClient, input: EmitInput, eventId: string, envelope: Envelope): Promise<void> => {
  const { rows } = await tx.query<{ run_id: string; position: number; when: string | null }>(
    // Each waiter's run by primary key (a lateral subquery fenced by `offset 0`): as a join, the generic
    // plan made while runs is small read every run of the project for each waiter (runs_project_created).
    `select j.run_id, j.position, j.args->>'when' as when
       from journal j cross join lateral (select r.project_id, r.trigger from runs r where r.id = j.run_id offset 0) r
      where r.project_id = $1 and j.kind = 'wait-event' and j.name = $2 and j.status = 'pending'
        and (j.args->>'after_seq')::bigint < (select seq from events where id = $3)
        and ($4::text is null or r.trigger->>'key' is null or r.trigger->>'key' = $4)
      order by j.run_id, j.position`,
    [input.projectId, input.type, eventId, input.key],
  );
  const woken = new Set<string>();
  for (const w of rows) {
    const { rows: run } = await tx.query<{ trusted: boolean }>(`select trusted from runs where id = $1 for update`, [w.run_id]);
    // A graph's event node with `when`: an event it declines leaves it parked, privately (no trace, no trust change).
    if (w.when !== null && !(await graphWaitAccepts(tx, w.run_id, w.when, envelope))) continue;
    // A run that takes in an untrusted event is untrusted from then on: its later passes get no secrets.
    if (run[0]?.trusted && !trustAfterReceiving(run[0], input)) await tx.query(`update runs set trusted = false where id = $1`, [w.run_id]);
    await resolveEntry(tx, w.run_id, w.position, { envelope });
    woken.add(w.run_id);
  }
  for (const runId of woken) await wakeRun(tx, runId);
};
