import type { FastifyRequest } from "fastify";
import type { Pool } from "pg";
import { FlowError } from "@flowsvc/core";
import { digestToken, jobByToken, type LeasedJob } from "@flowsvc/store";
import { bearerOf } from "./auth.js";

export const jobLost = (): FlowError =>
  new FlowError("job_lost", "this job's lease is gone: it finished, or it was dispatched again to another agent");

/** The job behind an agent request's token: one dispatch of one job, alive while it holds its lease. */
export const jobOfRequest = async (pool: Pool, req: FastifyRequest): Promise<LeasedJob & { digest: Buffer }> => {
  const token = bearerOf(req);
  if (!token) throw new FlowError("unauthenticated", "the agent API needs the job token (Authorization: Bearer <job token>)");
  const digest = digestToken(token);
  const job = await jobByToken(pool, digest);
  if (!job) throw jobLost();
  return { ...job, digest };
};
