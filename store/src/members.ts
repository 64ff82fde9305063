/**
 * Project membership (memberships, migration 001): who has which role on a project, managed by its
 * admins (ingest/src/routes/members.ts, `flow member`). A project always keeps one admin: the last
 * one can be neither demoted nor removed, checked under a lock on the project's admin rows so two
 * admins removing each other at once cannot both succeed. Removing a member disables, in the same
 * transaction, every connected account they granted in the project (the trigger of migration 018).
 */
import type { Pool, PoolClient } from "pg";
import { FlowError, type ProjectRole } from "@flowsvc/core";
import { withTransaction } from "./pool.js";
import type { ProjectRef } from "./tenancy.js";

type Db = Pool | PoolClient;

export interface Member {
  user: string;
  role: ProjectRole;
  /** The connected accounts of the project this user granted, by name. */
  granted: string[];
}

export const listMembers = async (db: Db, projectId: string): Promise<Member[]> => {
  const { rows } = await db.query<Member>(
    `select u.name as "user", m.role,
            coalesce((select array_agg(a.name order by a.name) from accounts a where a.project_id = m.project_id and a.granter_id = m.user_id), '{}') as granted
       from memberships m join users u on u.id = m.user_id where m.project_id = $1 order by u.name`,
    [projectId],
  );
  return rows;
};

/** The user's id; not_found when no user has that name. */
const userIdOf = async (tx: PoolClient, name: string): Promise<string> => {
  const { rows } = await tx.query<{ id: string }>(`select id from users where name = $1`, [name]);
  if (!rows[0])
    throw new FlowError("not_found", `no user named ${JSON.stringify(name)} on this server`, {
      hint: "check the name (`flow member ls` lists this project's members); `flow user add` makes a new user",
    });
  return rows[0].id;
};

/**
 * Locks the project's admin rows and answers the target's current role (undefined: not a member).
 * Refuses (conflict) when the change would leave the project with no admin.
 */
const lockAndCheckLastAdmin = async (
  tx: PoolClient,
  f: { project: ProjectRef; userId: string; user: string; newRole: ProjectRole | undefined },
): Promise<ProjectRole | undefined> => {
  const { rows: admins } = await tx.query<{ user_id: string }>(
    `select user_id from memberships where project_id = $1 and role = 'admin' order by user_id for update`,
    [f.project.projectId],
  );
  const { rows } = await tx.query<{ role: ProjectRole }>(`select role from memberships where project_id = $1 and user_id = $2 for update`, [
    f.project.projectId,
    f.userId,
  ]);
  const current = rows[0]?.role;
  const leavesNoAdmin = current === "admin" && f.newRole !== "admin" && admins.length <= 1;
  if (leavesNoAdmin)
    throw new FlowError("conflict", `${f.user} is the last admin of ${f.project.org}/${f.project.project}: a project keeps at least one`, {
      hint: `make another member admin first (flow member set <user> --role admin)`,
      details: { field: "user" },
    });
  return current;
};

/** Gives a user a role on the project (adding them when they are no member yet). */
export const setMemberRole = async (
  pool: Pool,
  f: { project: ProjectRef; user: string; role: ProjectRole },
): Promise<{ user: string; role: ProjectRole; added: boolean }> =>
  withTransaction(pool, async (tx) => {
    const userId = await userIdOf(tx, f.user);
    const current = await lockAndCheckLastAdmin(tx, { project: f.project, userId, user: f.user, newRole: f.role });
    await tx.query(
      `insert into memberships (project_id, user_id, role) values ($1, $2, $3)
       on conflict (project_id, user_id) do update set role = excluded.role`,
      [f.project.projectId, userId, f.role],
    );
    return { user: f.user, role: f.role, added: current === undefined };
  });

/**
 * Removes a user from the project; answers the connected accounts of the project they granted that
 * were usable and are now `disabled` (migration 018's trigger, in this transaction). not_found when
 * the user is no member; conflict when they are its last admin.
 */
export const removeMember = async (pool: Pool, f: { project: ProjectRef; user: string }): Promise<{ user: string; disabled: string[] }> =>
  withTransaction(pool, async (tx) => {
    const userId = await userIdOf(tx, f.user);
    const current = await lockAndCheckLastAdmin(tx, { project: f.project, userId, user: f.user, newRole: undefined });
    if (current === undefined)
      throw new FlowError("not_found", `${f.user} is not a member of ${f.project.org}/${f.project.project}`, {
        hint: "list the members with `flow member ls`",
      });
    const { rows } = await tx.query<{ name: string }>(
      `select name from accounts where project_id = $1 and granter_id = $2 and status <> 'disabled' order by name for update`,
      [f.project.projectId, userId],
    );
    await tx.query(`delete from memberships where project_id = $1 and user_id = $2`, [f.project.projectId, userId]);
    return { user: f.user, disabled: rows.map((r) => r.name) };
  });
