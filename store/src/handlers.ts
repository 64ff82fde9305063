// Handlers: registered reactions to event types (spec "Handler"). emit.ts reads the table at
// delivery; these are the queries behind `flow handler set|ls|show|rm`. The rules of a handler are
// core's (core/src/resources/handler.ts); writes come through the ResourceStore (resource-store.ts).
import type { Pool, PoolClient } from "pg";
import type { HandlerInput, HandlerRecord, Reaction } from "@flowsvc/core";

type Db = Pool | PoolClient;

interface HandlerRaw {
  name: string;
  patterns: string[];
  when_cel: string | null;
  reaction: Reaction;
  tags: string[];
  credentials: Record<string, string>;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `name, patterns, when_cel, reaction, tags, credentials, created_at, updated_at`;

const toRecord = (r: HandlerRaw): HandlerRecord => ({
  name: r.name,
  on: r.patterns,
  when: r.when_cel,
  reaction: r.reaction,
  tags: r.tags,
  credentials: r.credentials,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

/** Creates or replaces a handler; `created` tells which. Runs already started keep their own copy of the source. */
export const upsertHandler = async (db: Db, projectId: string, h: HandlerInput): Promise<{ handler: HandlerRecord; created: boolean }> => {
  const { rows } = await db.query<HandlerRaw & { created: boolean }>(
    `insert into handlers (project_id, name, patterns, when_cel, reaction, tags, credentials)
     values ($1, $2, $3, $4, $5, $6, $7)
     on conflict (project_id, name) do update
       set patterns = excluded.patterns, when_cel = excluded.when_cel, reaction = excluded.reaction,
           tags = excluded.tags, credentials = excluded.credentials, updated_at = now()
     returning ${COLUMNS}, (xmax = 0) as created`,
    [projectId, h.name, h.on, h.when, JSON.stringify(h.reaction), h.tags, JSON.stringify(h.credentials)],
  );
  const row = rows[0]!;
  return { handler: toRecord(row), created: row.created };
};

export const listHandlers = async (db: Db, projectId: string): Promise<HandlerRecord[]> => {
  const { rows } = await db.query<HandlerRaw>(`select ${COLUMNS} from handlers where project_id = $1 order by name`, [projectId]);
  return rows.map(toRecord);
};

export const getHandler = async (db: Db, projectId: string, name: string): Promise<HandlerRecord | undefined> => {
  const { rows } = await db.query<HandlerRaw>(`select ${COLUMNS} from handlers where project_id = $1 and name = $2`, [projectId, name]);
  return rows[0] ? toRecord(rows[0]) : undefined;
};

/** False when there was no such handler. Runs it already started go on. */
export const deleteHandler = async (db: Db, projectId: string, name: string): Promise<boolean> => {
  const { rowCount } = await db.query(`delete from handlers where project_id = $1 and name = $2`, [projectId, name]);
  return (rowCount ?? 0) > 0;
};
