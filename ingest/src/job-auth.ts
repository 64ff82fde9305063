import type { FastifyRequest } from "fastify";
import type { Pool } from "pg";
import { FlowError } from "@flowsvc/core";
import { digestToken, jobAndRunByToken, jobByToken, type LeasedJob, type RunInternal } from "@flowsvc/store";
import { bearerOf } from "./auth.js";

export const jobLost = (): FlowError =>
  new FlowError("job_lost", "this job's lease is gone: it finished, or it was dispatched again to another agent");

/** The job behind an agent request's token: one dispatch of one job, alive while it holds its lease. */
export const jobOfRequest = async (pool: Pool, req: FastifyRequest): Promise<LeasedJob & { digest: Buffer }> => {
  const digest = tokenDigestOf(req);
  const job = await jobByToken(pool, digest);
  if (!job) throw jobLost();
  return { ...job, digest };
};

/** A claim's job and its run, in one lookup. */
export const jobAndRunOfRequest = async (pool: Pool, req: FastifyRequest): Promise<{ job: LeasedJob; run: RunInternal }> => {
  const found = await jobAndRunByToken(pool, tokenDigestOf(req));
  if (!found?.run) throw jobLost();
  return { job: found.job, run: found.run };
};

const tokenDigestOf = (req: FastifyRequest): Buffer => {
  const token = bearerOf(req);
  if (!token) throw new FlowError("unauthenticated", "the agent API needs the job token (Authorization: Bearer <job token>)");
  return digestToken(token);
};
