import type { Pool, PoolClient } from "pg";

type Db = Pool | PoolClient;

export interface SecretMeta {
  name: string;
  set_at: string;
}

export const upsertSecret = async (db: Db, projectId: string, name: string, sealed: Uint8Array): Promise<SecretMeta> => {
  const { rows } = await db.query<{ name: string; set_at: Date }>(
    `insert into secrets (project_id, name, sealed, set_at) values ($1, $2, $3, now())
     on conflict (project_id, name) do update set sealed = excluded.sealed, set_at = now()
     returning name, set_at`,
    [projectId, name, Buffer.from(sealed)],
  );
  const r = rows[0]!;
  return { name: r.name, set_at: r.set_at.toISOString() };
};

export const listSecrets = async (db: Db, projectId: string): Promise<SecretMeta[]> => {
  const { rows } = await db.query<{ name: string; set_at: Date }>(
    `select name, set_at from secrets where project_id = $1 order by name`,
    [projectId],
  );
  return rows.map((r) => ({ name: r.name, set_at: r.set_at.toISOString() }));
};

export const getSecretMeta = async (db: Db, projectId: string, name: string): Promise<SecretMeta | undefined> => {
  const { rows } = await db.query<{ name: string; set_at: Date }>(
    `select name, set_at from secrets where project_id = $1 and name = $2`,
    [projectId, name],
  );
  const r = rows[0];
  return r ? { name: r.name, set_at: r.set_at.toISOString() } : undefined;
};

export const deleteSecret = async (db: Db, projectId: string, name: string): Promise<boolean> => {
  const { rowCount } = await db.query(`delete from secrets where project_id = $1 and name = $2`, [projectId, name]);
  return (rowCount ?? 0) > 0;
};

/** Sealed values of every secret of a project, for resolution at claim. */
export const loadSealedSecrets = async (db: Db, projectId: string): Promise<Array<{ name: string; sealed: Uint8Array }>> => {
  const { rows } = await db.query<{ name: string; sealed: Buffer }>(`select name, sealed from secrets where project_id = $1 order by name`, [projectId]);
  return rows;
};
