import { createHash } from "node:crypto";
import type { PoolClient } from "pg";
import {
  CHAIN_DEPTH_LIMIT, FlowError, HANDLER_RUNS_IN_FLIGHT_LIMIT, SCRIPT_WORKFLOW, buildEnvelope, celEventVars, compileCel, derivedId,
  evaluatePredicate, matchesAny, type CompiledCel, type Envelope,
} from "@flowsvc/core";
import { appendEvent } from "./events.js";
import { resolveEntry } from "./journal-entries.js";
import { mintId } from "./mint.js";
import { wakeRun } from "./wake.js";

export interface EmitInput {
  projectId: string;
  type: string;
  key: string | null;
  payload: unknown;
  /** Forge scalar fields (sha, ref, repo, sender, ...). */
  fields?: Record<string, unknown>;
  /** The run that emitted it, if any: a custom emit from a handler run chains one generation deeper. */
  sourceRunId: string | null;
  /** False for a fork's pull request or an outsider's comment: its runs get no secrets or credentials. */
  trusted: boolean;
  hookName?: string;
  /** A forge delivery id: a redelivery answers the first event, and nothing is delivered twice. */
  deliveryId?: string;
  /**
   * A platform event (`run.*`, `manual`, `spawn`): its recording is part of a state change that
   * must not fail, so over the in-flight limit it is recorded and its handler runs are dropped
   * (reported in `dropped`) instead of failing the emit. Platform events of handler runs are
   * recorded and not delivered at all, so a handler on `run.*` cannot feed itself.
   */
  platform?: boolean;
}

export interface EmitResult {
  eventId: string;
  duplicate: boolean;
  handlerRuns: string[];
  /** Handlers whose `when` could not be evaluated: the event is declined for them (log it). */
  declined: Array<{ handler: string; error: string }>;
  /** Platform events only: handlers not started because the project had too many in flight. */
  dropped: string[];
}

interface HandlerRow {
  name: string;
  patterns: string[];
  when_cel: string | null;
  reaction: { kind: "script"; source: string; filename: string };
  tags: string[];
  credentials: Record<string, string>;
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

/** A handler run's id derives from (event id, handler name): a replayed emit resolves to the same run. */
export const handlerRunId = (eventId: string, handler: string): string =>
  derivedId("run", createHash("sha256").update(`${eventId}\u0000${handler}`).digest());

/**
 * The generation of an emit: that of the handler run it comes from, 0 for any other. The handler
 * runs it starts are one deeper, so an outside event starts generation 1, and an emit from a
 * generation-5 run would start a sixth: refused.
 */
const generationOf = async (tx: PoolClient, sourceRunId: string | null): Promise<number> => {
  if (!sourceRunId) return 0;
  const { rows } = await tx.query<{ generation: number; handler_name: string | null }>(`select generation, handler_name from runs where id = $1`, [sourceRunId]);
  const r = rows[0];
  return r?.handler_name ? r.generation : 0;
};

/**
 * One emit: the event row and every delivery it causes, in the caller's transaction, so a crash
 * before commit loses nothing that was acknowledged and delivers nothing that was not recorded.
 * Every matching handler gets a run; every parked `flow wait-event` of the type gets the envelope.
 */
export const emitEvent = async (tx: PoolClient, input: EmitInput): Promise<EmitResult> => {
  if (input.deliveryId && input.hookName) {
    const { rows } = await tx.query<{ id: string }>(`select id from events where project_id = $1 and hook_name = $2 and delivery_id = $3`, [
      input.projectId, input.hookName, input.deliveryId,
    ]);
    if (rows[0]) return { eventId: rows[0].id, duplicate: true, handlerRuns: [], declined: [], dropped: [] };
  }
  const generation = input.platform ? 0 : await generationOf(tx, input.sourceRunId);
  if (generation >= CHAIN_DEPTH_LIMIT) {
    throw new FlowError("limit_exceeded", `this emit would start generation ${generation + 1} of a handler chain; chains stop at ${CHAIN_DEPTH_LIMIT} generations, and nothing was recorded or delivered`);
  }
  const eventId = mintId("evt");
  await appendEvent(tx, {
    id: eventId, projectId: input.projectId, type: input.type, key: input.key, payload: input.payload, sourceRunId: input.sourceRunId, generation,
    fields: input.fields, hookName: input.hookName, deliveryId: input.deliveryId, trusted: input.trusted,
  });
  const envelope = buildEnvelope({ id: eventId, type: input.type, key: input.key, payload: input.payload, ...(input.fields ? { fields: input.fields } : {}) });
  if (input.platform && (await isHandlerRun(tx, input.sourceRunId))) return { eventId, duplicate: false, handlerRuns: [], declined: [], dropped: [] };
  const { runs, declined, dropped } = await startHandlerRuns(tx, input, eventId, generation, envelope);
  await deliverToWaiters(tx, input, eventId, envelope);
  return { eventId, duplicate: false, handlerRuns: runs, declined, dropped };
};

const isHandlerRun = async (tx: PoolClient, runId: string | null): Promise<boolean> => {
  if (!runId) return false;
  const { rows } = await tx.query<{ handler_name: string | null }>(`select handler_name from runs where id = $1`, [runId]);
  return Boolean(rows[0]?.handler_name);
};

const startHandlerRuns = async (
  tx: PoolClient,
  input: EmitInput,
  eventId: string,
  generation: number,
  envelope: Envelope,
): Promise<{ runs: string[]; declined: EmitResult["declined"]; dropped: string[] }> => {
  const { rows: handlers } = await tx.query<HandlerRow>(
    `select name, patterns, when_cel, reaction, tags, credentials from handlers where project_id = $1 order by name`,
    [input.projectId],
  );
  const declined: EmitResult["declined"] = [];
  const chosen: HandlerRow[] = [];
  for (const h of handlers) {
    if (!matchesAny(h.patterns, input.type)) continue;
    // Handlers registered with --credential do not serve untrusted deliveries.
    if (!input.trusted && Object.keys(h.credentials).length > 0) continue;
    if (h.when_cel) {
      const r = evaluatePredicate(compileCached(h.when_cel), celEventVars(envelope));
      if (r.error) declined.push({ handler: h.name, error: r.error });
      if (!r.matched) continue;
    }
    chosen.push(h);
  }
  if (chosen.length === 0) return { runs: [], declined, dropped: [] };
  // Count-then-insert must not interleave across concurrent emits of the project, or together
  // they pass the limit: serialise them (only emits that start handler runs pay for it).
  await tx.query(`select pg_advisory_xact_lock(hashtextextended($1, 16))`, [`handlers-in-flight\u001f${input.projectId}`]);
  const { rows } = await tx.query<{ n: string }>(
    `select count(*) as n from runs where project_id = $1 and handler_name is not null and status in ('queued', 'running', 'parked')`,
    [input.projectId],
  );
  const inFlight = Number(rows[0]!.n);
  if (inFlight + chosen.length > HANDLER_RUNS_IN_FLIGHT_LIMIT) {
    if (input.platform) return { runs: [], declined, dropped: chosen.map((h) => h.name) };
    throw new FlowError("limit_exceeded", `${inFlight} handler runs are in flight in this project (at most ${HANDLER_RUNS_IN_FLIGHT_LIMIT}); the event was not recorded or delivered`, {
      hint: "retry when the backlog drains (flow runs ls --status running)",
    });
  }
  const trigger = { type: input.type, event: eventId, ...(input.key ? { key: input.key } : {}), ...(input.fields ?? {}) };
  const runs: string[] = [];
  for (const h of chosen) {
    const id = handlerRunId(eventId, h.name);
    const { rowCount } = await tx.query(
      `insert into runs (id, project_id, workflow, status, source, filename, interpreter, env, tags, trigger, handler_name, event_id, generation, trusted)
       values ($1, $2, $3, 'queued', $4, $5, '{bash,-eu}', '{}', $6, $7, $8, $9, $10, $11) on conflict (id) do nothing`,
      [id, input.projectId, SCRIPT_WORKFLOW, h.reaction.source, h.reaction.filename, h.tags, JSON.stringify(trigger), h.name, eventId, generation + 1, input.trusted],
    );
    if ((rowCount ?? 0) === 0) continue;
    await tx.query(`insert into jobs (id, run_id, status, kind, capabilities) values ($1, $2, 'queued', 'run', '{polyglot}')`, [mintId("job"), id]);
    runs.push(id);
  }
  if (runs.length > 0) await tx.query(`select pg_notify('flowsvc_jobs', $1)`, [eventId]);
  return { runs, declined, dropped: [] };
};

/**
 * `flow wait-event <type>`: every parked waiter of the type that began before this event gets the
 * envelope. A keyed event reaches a run only when the run has no subject or the same one.
 */
const deliverToWaiters = async (tx: PoolClient, input: EmitInput, eventId: string, envelope: Envelope): Promise<void> => {
  const { rows } = await tx.query<{ run_id: string; position: number }>(
    `select j.run_id, j.position from journal j join runs r on r.id = j.run_id
      where r.project_id = $1 and j.kind = 'wait-event' and j.name = $2 and j.status = 'pending'
        and (j.args->>'after_seq')::bigint < (select seq from events where id = $3)
        and ($4::text is null or r.trigger->>'key' is null or r.trigger->>'key' = $4)
      order by j.run_id, j.position`,
    [input.projectId, input.type, eventId, input.key],
  );
  const woken = new Set<string>();
  for (const w of rows) {
    await tx.query(`select 1 from runs where id = $1 for update`, [w.run_id]);
    await resolveEntry(tx, w.run_id, w.position, { envelope });
    woken.add(w.run_id);
  }
  for (const runId of woken) await wakeRun(tx, runId);
};
