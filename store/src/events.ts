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

interface EventRaw extends Omit<EventRecord, "created_at"> {
  created_at: Date;
}

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
    `select id, type, key, payload, source_run_id, generation, created_at from events where id = $2 and (project_id = $1) is true`,
    // `(project_id = $1) is true`: the same test in a form no index serves, so the event is found by
    // primary key. As `project_id = $1`, the generic plan made while events is small (a new server's
    // connections keep it) chose events_project_type and read every event of the project per call.
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
  const { rows } = await db.query<{
    id: string;
    type: string;
    key: string | null;
    payload: unknown;
    fields: Record<string, unknown> | null;
  }>(`select id, type, key, payload, fields from events where id = $1`, [id]);
  return rows[0];
};
