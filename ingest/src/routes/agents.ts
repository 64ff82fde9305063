/**
 * `GET /api/v1/agents` (`flow agents ls`): the agents this server knows, for any user. Local agent
 * processes come from `flow server`'s launchers (idle ones are known nowhere else); every job an
 * agent holds or is being started for comes from Postgres (store listAgentJobs), so agent Pods and
 * another server's agents appear too. A job's run and project are shown only to members of its
 * project: anyone else sees that the agent is busy, not with what.
 */
import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import { listAgentJobs, type AgentJobRow } from "@flowsvc/store";
import { authenticateUser } from "../auth.js";
import type { LocalAgentView, RouteDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";

export const AgentInfo = z.object({
  id: z.string().nullable().describe("local-<pid> for a local agent process; the claim's agent_id otherwise (null until claimed)"),
  where: z
    .enum(["local", "remote"])
    .describe("local: a process of this server; remote: known by the job it holds (an agent Pod, another server's agent)"),
  pid: z.number().int().nullable(),
  capabilities: z.array(z.string()).describe("a local pool's capabilities; for a remote agent, what its job needs"),
  status: z.enum(["idle", "busy", "starting"]),
  job_id: z.string().nullable(),
  run_id: z.string().nullable(),
  project: z.string().nullable().describe("org/project of the run, for its members only"),
  last_seen: z.string().nullable().describe("the claim's or last heartbeat's time; now for a live local process"),
});
export type AgentInfo = z.infer<typeof AgentInfo>;

/** The job's ids and project, for a member of its project; nulls for anyone else. */
const jobOf = (job: AgentJobRow | undefined): Pick<AgentInfo, "job_id" | "run_id" | "project"> =>
  job?.visible
    ? { job_id: job.job_id, run_id: job.run_id, project: `${job.org}/${job.project}` }
    : { job_id: null, run_id: null, project: null };

/** Local processes first (each with its job's row, when it holds one), then the jobs no local process holds. */
export const describeAgents = (local: readonly LocalAgentView[], jobs: readonly AgentJobRow[], now: Date): AgentInfo[] => {
  const byJob = new Map(jobs.map((j) => [j.job_id, j]));
  const rows: AgentInfo[] = local.map((a) => {
    const job = a.jobId === undefined ? undefined : byJob.get(a.jobId);
    if (a.jobId !== undefined) byJob.delete(a.jobId);
    return {
      id: a.id,
      where: "local",
      pid: a.pid,
      capabilities: [...a.capabilities],
      status: a.status,
      ...jobOf(job),
      last_seen: (job?.last_seen ?? now).toISOString(),
    };
  });
  for (const j of byJob.values())
    rows.push({
      id: j.agent_id,
      where: "remote",
      pid: null,
      capabilities: j.capabilities,
      status: j.status === "running" ? "busy" : "starting",
      ...jobOf(j),
      last_seen: j.last_seen.toISOString(),
    });
  return rows;
};

export const agentListRoutes: FastifyPluginCallback<RouteDeps> = (app, deps, done) => {
  const doc = api({
    summary: "The agents this server knows: local agent processes and every agent holding a job",
    tag: "agents",
    auth: "user",
    response: { schema: z.array(AgentInfo) },
  });
  app.get("/api/v1/agents", doc, async (req) => {
    const caller = await authenticateUser(deps.pool, req);
    return describeAgents(deps.localAgents?.() ?? [], await listAgentJobs(deps.pool, caller.userId), new Date());
  });
  done();
};
