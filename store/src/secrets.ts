import type { Pool, PoolClient } from "pg";
import { FlowError, type SecretMeta } from "@flowsvc/core";
import { credentialStampSql } from "./credentials.js";
import type { Keyring } from "./keyring.js";
import { RUN_BY_ID_SQL, RUN_VIEW_COLUMNS, toRunView, type RunRowRaw, type RunView } from "./runs.js";

type Db = Pool | PoolClient;

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
  const { rows } = await db.query<{ name: string; set_at: Date }>(`select name, set_at from secrets where project_id = $1 order by name`, [
    projectId,
  ]);
  return rows.map((r) => ({ name: r.name, set_at: r.set_at.toISOString() }));
};

export const getSecretMeta = async (db: Db, projectId: string, name: string): Promise<SecretMeta | undefined> => {
  const { rows } = await db.query<{ name: string; set_at: Date }>(`select name, set_at from secrets where project_id = $1 and name = $2`, [
    projectId,
    name,
  ]);
  const r = rows[0];
  return r ? { name: r.name, set_at: r.set_at.toISOString() } : undefined;
};

export const deleteSecret = async (db: Db, projectId: string, name: string): Promise<boolean> => {
  const { rowCount } = await db.query(`delete from secrets where project_id = $1 and name = $2`, [projectId, name]);
  return (rowCount ?? 0) > 0;
};

/** Sealed values of every secret of a project, for resolution at claim. */
export const loadSealedSecrets = async (db: Db, projectId: string): Promise<Array<{ name: string; sealed: Uint8Array }>> => {
  const { rows } = await db.query<{ name: string; sealed: Buffer }>(
    `select name, sealed from secrets where project_id = $1 order by name`,
    [projectId],
  );
  return rows;
};

/** A project secret, opened: its value, or `undefined` when the sealed value does not open with this server's keys. */
export interface OpenedSecret {
  name: string;
  value: string | undefined;
}

/**
 * Every secret of a project, opened (the claim injects them, the run masker masks with them). A
 * value that does not open (a wrong master key, a sealed value moved or altered) comes back
 * without a value: one bad row must not fail every run of the project, so the caller decides.
 */
export const openProjectSecrets = async (db: Db, keyring: Keyring, projectId: string, orgId: string): Promise<OpenedSecret[]> =>
  openSealedSecrets(keyring, { projectId, orgId }, await loadSealedSecrets(db, projectId));

/** openProjectSecrets on sealed rows already read (the claim reads them with its job: store's claimReadsByToken). */
export const openSealedSecrets = async (
  keyring: Keyring,
  scope: { readonly projectId: string; readonly orgId: string },
  sealed: ReadonlyArray<{ name: string; sealed: Uint8Array }>,
): Promise<OpenedSecret[]> =>
  Promise.all(
    sealed.map(async (s) => ({
      name: s.name,
      // Only a value that does not open is skipped; a database error fails the caller, not silently its secrets.
      value: await keyring
        .open(scope.orgId, { org: scope.orgId, project: scope.projectId, kind: "secret", name: s.name }, s.sealed)
        .catch((err: unknown) => {
          if (err instanceof FlowError) return undefined;
          throw err;
        }),
    })),
  );

/**
 * The stamp of a project's secrets and credentials, as SQL over `projectIdSql`: (name, set_at) of
 * every secret of the project, digested, then the stamp of its credentials and accounts
 * (credentialStampSql). Setting, replacing or deleting a secret or a credential changes the stamp,
 * so a cache of the opened values (ingest/src/run-masker.ts) knows it is stale without opening anything.
 */
const secretStampSql = (projectIdSql: string): string =>
  `(select coalesce(md5(string_agg(s.name || '@' || s.set_at::text, ',' order by s.name)), '')
      from secrets s where s.project_id = ${projectIdSql}) || '/' || ${credentialStampSql(projectIdSql)}`;

/** Where a run's secrets live, and their stamp (secretStampSql), in one statement. */
export const runSecretScope = async (db: Db, runId: string): Promise<{ projectId: string; orgId: string; stamp: string } | undefined> => {
  const { rows } = await db.query<{ project_id: string; org_id: string; stamp: string }>(
    `select r.project_id, p.org_id, ${secretStampSql("r.project_id")} as stamp
       from runs r join projects p on p.id = r.project_id where r.id = $1`,
    [runId],
  );
  const r = rows[0];
  return r ? { projectId: r.project_id, orgId: r.org_id, stamp: r.stamp } : undefined;
};

/** The stamp of a project's secrets and credentials (secretStampSql) and its org. */
export const projectSecretScope = async (
  db: Db,
  projectId: string,
): Promise<{ projectId: string; orgId: string; stamp: string } | undefined> => {
  const { rows } = await db.query<{ org_id: string; stamp: string }>(
    `select p.org_id, ${secretStampSql("p.id")} as stamp from projects p where p.id = $1`,
    [projectId],
  );
  const r = rows[0];
  return r ? { projectId, orgId: r.org_id, stamp: r.stamp } : undefined;
};

/**
 * A run as the API shows it (getRunView) and its project's secret scope (projectSecretScope) in
 * one statement: what a submit answers, masked, without a second round trip.
 */
export const getRunViewInSecretScope = async (
  db: Db,
  projectId: string,
  runId: string,
): Promise<{ view: RunView; scope: { projectId: string; orgId: string; stamp: string } } | undefined> => {
  const { rows } = await db.query<RunRowRaw & { scope_org_id: string | null; scope_stamp: string }>(
    `select ${RUN_VIEW_COLUMNS},
            (select p.org_id from projects p where p.id = $1) as scope_org_id, ${secretStampSql("$1")} as scope_stamp
       from ${RUN_BY_ID_SQL} where project_id = $1`,
    [projectId, runId],
  );
  const r = rows[0];
  if (!r || r.scope_org_id === null) return undefined;
  const { scope_org_id: orgId, scope_stamp: stamp, ...run } = r;
  return { view: toRunView(run), scope: { projectId, orgId, stamp } };
};
