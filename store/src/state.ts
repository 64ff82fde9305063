import type { Pool, PoolClient } from "pg";

type Db = Pool | PoolClient;

/** `flow state`: a run-private cell (`run:<id>`) or a project-wide entity's (`entity:<name>`). */
export const stateScope = (runId: string, entity: string | undefined): string => (entity ? `entity:${entity}` : `run:${runId}`);

/** One `flow state` cell: a key in a project's scope. */
export interface StateCell {
  projectId: string;
  scope: string;
  key: string;
}

export const getState = async (db: Db, { projectId, scope, key }: StateCell): Promise<{ found: boolean; value: unknown }> => {
  const { rows } = await db.query<{ value: unknown }>(`select value from state_cells where project_id = $1 and scope = $2 and key = $3`, [
    projectId,
    scope,
    key,
  ]);
  return rows[0] ? { found: true, value: rows[0].value } : { found: false, value: null };
};

export const setState = async (db: Db, { projectId, scope, key }: StateCell, value: unknown): Promise<void> => {
  await db.query(
    `insert into state_cells (project_id, scope, key, value) values ($1, $2, $3, $4)
     on conflict (project_id, scope, key) do update set value = excluded.value, updated_at = now()`,
    [projectId, scope, key, JSON.stringify(value ?? null)],
  );
};

export const deleteState = async (db: Db, { projectId, scope, key }: StateCell): Promise<void> => {
  await db.query(`delete from state_cells where project_id = $1 and scope = $2 and key = $3`, [projectId, scope, key]);
};

export const listState = async (db: Db, projectId: string, scope: string): Promise<Array<{ key: string; value: unknown }>> => {
  const { rows } = await db.query<{ key: string; value: unknown }>(
    `select key, value from state_cells where project_id = $1 and scope = $2 order by key`,
    [projectId, scope],
  );
  return rows;
};
