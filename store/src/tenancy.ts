import type { Pool, PoolClient } from "pg";

export type Role = "viewer" | "member" | "admin";
export const ROLE_RANK: Record<Role, number> = { viewer: 1, member: 2, admin: 3 };

type Db = Pool | PoolClient;

export interface ProjectRef {
  orgId: string;
  projectId: string;
  org: string;
  project: string;
}

export interface Caller {
  userId: string;
  userName: string;
}

export const findProject = async (db: Db, org: string, project: string): Promise<ProjectRef | undefined> => {
  const { rows } = await db.query<{ org_id: string; project_id: string }>(
    `select o.id as org_id, p.id as project_id from projects p join orgs o on o.id = p.org_id
      where o.name = $1 and p.name = $2`,
    [org, project],
  );
  const r = rows[0];
  return r ? { orgId: r.org_id, projectId: r.project_id, org, project } : undefined;
};

export const findProjectById = async (db: Db, projectId: string): Promise<ProjectRef | undefined> => {
  const { rows } = await db.query<{ org_id: string; org: string; project: string }>(
    `select o.id as org_id, o.name as org, p.name as project from projects p join orgs o on o.id = p.org_id where p.id = $1`,
    [projectId],
  );
  const r = rows[0];
  return r ? { orgId: r.org_id, projectId, org: r.org, project: r.project } : undefined;
};

/** Touches the token's last_used_at ($1, its digest) at most once a minute: the head of a caller lookup. */
const TOUCH_TOKEN = `with t as (
       update api_tokens set last_used_at = now()
        where digest = $1 and (last_used_at is null or last_used_at < now() - interval '1 minute')
       returning user_id)`;

const CALLER_BY_TOKEN = `${TOUCH_TOKEN}
     select u.id as user_id, u.name from api_tokens k join users u on u.id = k.user_id where k.digest = $1`;

/**
 * The membership is a lookup by its primary key (a lateral subquery fenced by `offset 0`): as a
 * join, the generic plan made while the tables are small (a new server's connections keep it)
 * probed memberships by user alone, reading the caller's row in every project, once per request
 * (generic-plans.test.ts).
 */
const CALLER_IN_PROJECT = `${TOUCH_TOKEN}
     select u.id as user_id, u.name, p.org_id, p.project_id, m.role
       from api_tokens k join users u on u.id = k.user_id
       left join (select o.id as org_id, p.id as project_id from projects p join orgs o on o.id = p.org_id
                   where o.name = $2 and p.name = $3) p on true
       left join lateral (select m.role from memberships m where m.project_id = p.project_id and m.user_id = u.id offset 0) m on true
      where k.digest = $1`;

/** The caller behind a token digest; touches last_used_at at most once a minute. */
export const findCallerByTokenDigest = async (db: Db, digest: Buffer): Promise<Caller | undefined> => {
  const { rows } = await db.query<{ user_id: string; name: string }>(CALLER_BY_TOKEN, [digest]);
  const r = rows[0];
  return r ? { userId: r.user_id, userName: r.name } : undefined;
};

/**
 * An API call's authentication and scope in one round trip: the caller behind a token digest
 * (touching last_used_at at most once a minute), the project named (org, project), and the
 * caller's role on it. `caller` is undefined for an unknown token; `project` for a project that
 * does not exist; `role` when the caller is not a member.
 */
export const findCallerInProject = async (
  db: Db,
  digest: Buffer,
  org: string,
  project: string,
): Promise<{ caller?: Caller; project?: ProjectRef; role?: Role }> => {
  const { rows } = await db.query<{ user_id: string; name: string; org_id: string | null; project_id: string | null; role: Role | null }>(
    CALLER_IN_PROJECT,
    [digest, org, project],
  );
  const r = rows[0];
  if (!r) return {};
  return {
    caller: { userId: r.user_id, userName: r.name },
    ...(r.org_id && r.project_id ? { project: { orgId: r.org_id, projectId: r.project_id, org, project } } : {}),
    ...(r.role ? { role: r.role } : {}),
  };
};

export const listMemberships = async (db: Db, userId: string): Promise<Array<{ org: string; project: string; role: Role }>> => {
  const { rows } = await db.query<{ org: string; project: string; role: Role }>(
    `select o.name as org, p.name as project, m.role from memberships m
       join projects p on p.id = m.project_id join orgs o on o.id = p.org_id
      where m.user_id = $1 order by o.name, p.name`,
    [userId],
  );
  return rows;
};

export interface BootstrapIds {
  orgId: string;
  projectId: string;
  userId: string;
  tokenId: string;
}

/**
 * First start: org `default`, project `default`, user `admin` with an admin membership and one
 * token (only its digest is stored). Returns false when the org already exists (nothing written).
 */
export const bootstrapTenancy = async (
  db: PoolClient,
  ids: BootstrapIds,
  tokenDigest: Buffer,
  wrappedOrgKey: Uint8Array,
): Promise<boolean> => {
  const { rowCount } = await db.query(`insert into orgs (id, name) values ($1, 'default') on conflict (name) do nothing`, [ids.orgId]);
  if (rowCount === 0) return false;
  await db.query(`insert into org_keys (org_id, wrapped) values ($1, $2)`, [ids.orgId, Buffer.from(wrappedOrgKey)]);
  await db.query(`insert into projects (id, org_id, name) values ($1, $2, 'default')`, [ids.projectId, ids.orgId]);
  await db.query(`insert into users (id, name) values ($1, 'admin')`, [ids.userId]);
  await db.query(`insert into memberships (project_id, user_id, role) values ($1, $2, 'admin')`, [ids.projectId, ids.userId]);
  await db.query(`insert into api_tokens (id, user_id, digest, label) values ($1, $2, $3, 'bootstrap')`, [
    ids.tokenId,
    ids.userId,
    tokenDigest,
  ]);
  return true;
};

export const getWrappedOrgKey = async (db: Db, orgId: string): Promise<Uint8Array | undefined> => {
  const { rows } = await db.query<{ wrapped: Buffer }>(`select wrapped from org_keys where org_id = $1`, [orgId]);
  return rows[0]?.wrapped;
};

/** For tests and admin tooling: a user with a role on a project and a token. */
export const createUserWithToken = async (
  db: Db,
  ids: { userId: string; tokenId: string },
  user: { readonly name: string; readonly projectId: string; readonly role: Role; readonly tokenDigest: Buffer },
): Promise<void> => {
  const { name, projectId, role, tokenDigest } = user;
  await db.query(`insert into users (id, name) values ($1, $2)`, [ids.userId, name]);
  await db.query(`insert into memberships (project_id, user_id, role) values ($1, $2, $3)`, [projectId, ids.userId, role]);
  await db.query(`insert into api_tokens (id, user_id, digest, label) values ($1, $2, $3, $4)`, [
    ids.tokenId,
    ids.userId,
    tokenDigest,
    name,
  ]);
};

/** An org that has a data key (the oldest), to check a master key against at start; undefined in a new database. */
export const anyKeyedOrg = async (db: Db): Promise<string | undefined> => {
  const { rows } = await db.query<{ org_id: string }>(`select org_id from org_keys order by created_at, org_id limit 1`);
  return rows[0]?.org_id;
};
