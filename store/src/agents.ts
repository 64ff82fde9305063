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

/** The jobs agents hold, newest sign of life first (at most `limit`). */
export const listAgentJobs = async (db: Db, userId: string, limit = 500): Promise<AgentJobRow[]> => {
  const { rows } = await db.query<AgentJobRow>(
    `select j.id as job_id, j.run_id, j.kind, j.status, j.agent_id, j.capabilities, j.updated_at as last_seen,
            o.name as org, p.name as project, (m.user_id is not null) as visible
       from jobs j
       join runs r on r.id = j.run_id
       join projects p on p.id = r.project_id
       join orgs o on o.id = p.org_id
       left join memberships m on m.project_id = r.project_id and m.user_id = $1
      where j.status in ('dispatched', 'running')
      order by j.updated_at desc
      limit $2`,
    [userId, limit],
  );
  return rows;
};
