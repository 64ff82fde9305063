import type { Pool, PoolClient } from "pg";

type Db = Pool | PoolClient;

export interface EventRecord {
  id: string;
  type: string;
  key: string | null;
  payload: unknown;
  source_run_id: string | null;
  generation: number;
  created_at: string;
}

export interface NewEvent {
  id: string;
  projectId: string;
  type: string;
  key: string | null;
  payload: unknown;
  sourceRunId: string | null;
  generation: number;
  fields?: Record<string, unknown> | undefined;
  hookName?: string | undefined;
  deliveryId?: string | undefined;
  trusted?: boolean | undefined;
}

/**
 * Append-only: one row per emit, and its NOTIFY, in ONE round trip (hook ingest pays for every
 * statement). Deliveries to handlers and waiters join the caller's transaction.
 */
export const appendEvent = async (db: Db, e: NewEvent): Promise<void> => {
  await db.query(
    `with ins as (
       insert into events (id, project_id, type, key, payload, source_run_id, generation, fields, hook_name, delivery_id, trusted)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) returning project_id)
     select pg_notify('flowsvc_events', project_id) from ins`,
    [
      e.id, e.projectId, e.type, e.key, JSON.stringify(e.payload ?? null), e.sourceRunId, e.generation,
      e.fields ? JSON.stringify(e.fields) : null, e.hookName ?? null, e.deliveryId ?? null, e.trusted ?? true,
    ],
  );
};

interface EventRaw extends Omit<EventRecord, "created_at"> { created_at: Date }

export const listEvents = async (
  db: Db,
  projectId: string,
  filter: { type?: string | undefined; key?: string | undefined; limit: number },
): Promise<EventRecord[]> => {
  const { rows } = await db.query<EventRaw>(
    `select id, type, key, payload, source_run_id, generation, created_at from events
      where project_id = $1 and ($2::text is null or type = $2) and ($3::text is null or key = $3)
      order by seq desc limit $4`,
    [projectId, filter.type ?? null, filter.key ?? null, filter.limit],
  );
  return rows.map((r) => ({ ...r, created_at: r.created_at.toISOString() }));
};

export const getEvent = async (db: Db, projectId: string, id: string): Promise<EventRecord | undefined> => {
  const { rows } = await db.query<EventRaw>(
    `select id, type, key, payload, source_run_id, generation, created_at from events where project_id = $1 and id = $2`,
    [projectId, id],
  );
  const r = rows[0];
  return r ? { ...r, created_at: r.created_at.toISOString() } : undefined;
};

/** What buildEnvelope needs of a recorded event (the payload whole, whatever its size). */
export const getEventForEnvelope = async (
  db: Db,
  id: string,
): Promise<{ id: string; type: string; key: string | null; payload: unknown; fields: Record<string, unknown> | null } | undefined> => {
  const { rows } = await db.query<{ id: string; type: string; key: string | null; payload: unknown; fields: Record<string, unknown> | null }>(
    `select id, type, key, payload, fields from events where id = $1`,
    [id],
  );
  return rows[0];
};
