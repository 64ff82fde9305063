// The "seen on the bus" part of the event catalog (spec, Events > Delivery 8): each distinct type
// a project's bus has recorded, with its latest event as the sample.
import type { Pool, PoolClient } from "pg";

type Db = Pool | PoolClient;

export interface SeenEventType {
  type: string;
  /** The latest event of the type: its id, subject and time. */
  event_id: string;
  key: string | null;
  last_seen_at: string;
  /** Its payload, or null when the payload is over the sample cap (see `payload_bytes`). */
  sample_payload: unknown;
  /** Size of the payload as JSON text. */
  payload_bytes: number;
  /** True when the payload was left out for its size: `flow events show <event_id>` has it. */
  sample_omitted: boolean;
}

export interface SeenTypesOptions {
  /** At most this many types, in type order. */
  limit: number;
  /** Payloads larger than this (JSON text bytes) are left out of the sample. */
  sampleBytes: number;
}

interface SeenRaw {
  type: string;
  id: string;
  key: string | null;
  created_at: Date;
  payload: unknown;
  payload_bytes: number;
}

/**
 * Bounded whatever the bus holds: the distinct types come from a loose index scan over
 * events_project_type (one index probe per type, at most `limit` of them, instead of a scan of
 * every event), and each sample is one more probe for the type's highest seq.
 */
export const listSeenEventTypes = async (db: Db, projectId: string, opts: SeenTypesOptions): Promise<SeenEventType[]> => {
  const { rows } = await db.query<SeenRaw>(
    `with recursive types (type, n) as (
       (select type, 1 from events where project_id = $1 order by type limit 1)
       union all
       select (select e.type from events e where e.project_id = $1 and e.type > t.type order by e.type limit 1), t.n + 1
         from types t where t.type is not null and t.n < $2
     )
     select t.type, s.id, s.key, s.created_at,
            case when octet_length(s.payload::text) <= $3 then s.payload end as payload,
            coalesce(octet_length(s.payload::text), 4)::int as payload_bytes
       from types t
       cross join lateral (
         select id, key, created_at, payload from events
          where project_id = $1 and type = t.type order by seq desc limit 1
       ) s
      where t.type is not null
      order by t.type`,
    [projectId, opts.limit, opts.sampleBytes],
  );
  return rows.map((r) => ({
    type: r.type,
    event_id: r.id,
    key: r.key,
    last_seen_at: r.created_at.toISOString(),
    sample_payload: r.payload_bytes <= opts.sampleBytes ? r.payload : null,
    payload_bytes: r.payload_bytes,
    sample_omitted: r.payload_bytes > opts.sampleBytes,
  }));
};
