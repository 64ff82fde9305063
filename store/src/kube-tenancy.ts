// Kubernetes mode's tenancy: one namespace is one project, its org named by the namespace's label
// (controller/src/kube/reconcile-namespaces.ts). The reconciler makes the org (with its data key)
// and the project rows the first time it meets a namespace; both inserts are idempotent, so two
// controllers or a restart meeting the same namespace agree on one row each.
import type { Pool } from "pg";
import { findProject, type ProjectRef } from "./tenancy.js";
import { mintId } from "./mint.js";
import { withTransaction } from "./pool.js";
import { ADMIN_TENANCY_LOCK_KEY } from "./kube-admin.js";

/**
 * The project (org, project), created with its org when missing. `wrapKey` makes a new org's data
 * key (Keyring.newWrappedOrgKey) and is only called for an org that does not exist yet. The
 * users who administer the org's projects elsewhere, and the bootstrap `admin` user, become
 * admins of a new project: in a cluster, who may touch a namespace is Kubernetes RBAC's call; this
 * keeps the API and `flow status` usable for the operators who run flowsvc.
 */
export const ensureProject = async (
  pool: Pool,
  names: { org: string; project: string },
  wrapKey: (orgId: string) => Promise<Uint8Array>,
): Promise<ProjectRef> => {
  const found = await findProject(pool, names.org, names.project);
  if (found) return found;
  const orgId = mintId("org");
  const wrapped = await wrapKey(orgId);
  await withTransaction(pool, async (tx) => {
    // Shared against ensureClusterAdmin's exclusive hold: a project and admin made at once still meet.
    await tx.query(`select pg_advisory_xact_lock_shared(${ADMIN_TENANCY_LOCK_KEY})`);
    const { rows } = await tx.query<{ id: string }>(
      `with ins as (insert into orgs (id, name) values ($1, $2) on conflict (name) do nothing returning id)
       select id from ins union all select id from orgs where name = $2 limit 1`,
      [orgId, names.org],
    );
    const org = rows[0]!.id;
    if (org === orgId) await tx.query(`insert into org_keys (org_id, wrapped) values ($1, $2)`, [orgId, Buffer.from(wrapped)]);
    const projectId = mintId("prj");
    const { rowCount } = await tx.query(
      `insert into projects (id, org_id, name) values ($1, $2, $3) on conflict (org_id, name) do nothing`,
      [projectId, org, names.project],
    );
    if (rowCount === 0) return;
    await tx.query(
      `insert into memberships (project_id, user_id, role)
       select $1, u.id, 'admin' from users u where u.name = 'admin'
       union
       select $1, m.user_id, 'admin' from memberships m join projects p on p.id = m.project_id where p.org_id = $2 and m.role = 'admin'
       on conflict do nothing`,
      [projectId, org],
    );
  });
  const made = await findProject(pool, names.org, names.project);
  if (!made) throw new Error(`project ${names.org}/${names.project} was not created`);
  return made;
};

/** Every project with its org's name (the reconcilers' list diff keeps those of watched namespaces). */
export const listProjects = async (pool: Pool): Promise<ProjectRef[]> => {
  const { rows } = await pool.query<{ org_id: string; project_id: string; org: string; project: string }>(
    `select o.id as org_id, p.id as project_id, o.name as org, p.name as project from projects p join orgs o on o.id = p.org_id`,
  );
  return rows.map((r) => ({ orgId: r.org_id, projectId: r.project_id, org: r.org, project: r.project }));
};
