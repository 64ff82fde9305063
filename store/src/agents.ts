/**
 * What Postgres knows of agents (`flow agents ls`): every job an agent holds or is being started
 * for (status dispatched or running, the jobs_leased index), with the agent id its claim gave, its
 * last sign of life (the claim or the last heartbeat: both set updated_at), and whether the caller
 * may see the job's run (a member of its project); idle agents are known only to their launcher.
 */
import type { Pool, PoolClient } from "pg";

type Db = Pool | PoolClient;

export interface AgentJobRow {
  job_id: string;
  run_id: string;
  kind: "run" | "activity";
  /** `dispatched`: an agent is being started or has not claimed yet; `running`: claimed. */
  status: "dispatched" | "running";
  /** The claim's agent_id; null until the job is claimed. */
  agent_id: string | null;
  /** What the job needs: its agent advertises at least these. */
  capabilities: string[];
  last_seen: Date;
  org: string;
  project: string;
  /** The caller is a member of the run's project. */
  visible: boolean;
}

/**
 * The jobs agents hold, newest sign of life first (at most `limit`). Each job's run, project and org,
 * and the caller's membership, are lookups by primary key (fenced by `offset 0`): as joins, the
 * generic plan made while the tables are small (a new server's connections keep it) hashed a scan
 * of every run (generic-plans.test.ts).
 */
export const listAgentJobs = async (db: Db, userId: string, limit = 500): Promise<AgentJobRow[]> => {
  const { rows } = await db.query<AgentJobRow>(
    `select j.id as job_id, j.run_id, j.kind, j.status, j.agent_id, j.capabilities, j.updated_at as last_seen, r.org, r.project,
            exists (select 1 from memberships m where m.project_id = r.project_id and m.user_id = $1 offset 0) as visible
       from jobs j
       cross join lateral (select o.name as org, p.name as project, r.project_id
                             from runs r join projects p on p.id = r.project_id join orgs o on o.id = p.org_id
                            where r.id = j.run_id offset 0) r
      where j.status in ('dispatched', 'running')
      order by j.updated_at desc
      limit $2`,
    [userId, limit],
  );
  return rows;
};
