import type { IncomingHttpHeaders } from "node:http";
import type { FastifyRequest } from "fastify";
import type { Pool } from "pg";
import { FlowError } from "@flowsvc/core";
import {
  digestToken,
  claimByToken,
  jobAndRunByToken,
  jobByToken,
  tokenKindOf,
  type ClaimReads,
  type LeasedJob,
  type LeasedJobInScope,
  type ProjectRef,
  type RunInternal,
} from "@flowsvc/store";
import { bearerOf } from "./auth.js";

/** What the token is read from: a Fastify request, or a plain one served in front of Fastify (journal-front.ts). */
type WithHeaders = { readonly headers: IncomingHttpHeaders };

export const jobLost = (): FlowError =>
  new FlowError("job_lost", "this job's lease is gone: it finished, or it was dispatched again to another agent");

/** What a token's job was when it was last seen live, by token digest (hex); the oldest go first. */
const seenJobs = new Map<string, LeasedJobInScope>();
const SEEN_JOBS_MAX = 4096;

/**
 * The job behind an agent request's token: one dispatch of one job, alive while it holds its
 * lease, with its run's project and org (the scope its journal values are sealed in).
 */
export const jobOfRequest = async (pool: Pool, req: WithHeaders): Promise<LeasedJobInScope & { digest: Buffer }> => {
  const digest = jobTokenDigestOf(req);
  const job = await jobByToken(pool, digest);
  if (!job) throw jobLost();
  rememberJob(digest, job);
  return { ...job, digest };
};

const rememberJob = (digest: Buffer, job: LeasedJobInScope): void => {
  const key = digest.toString("hex");
  seenJobs.delete(key);
  seenJobs.set(key, job);
  if (seenJobs.size > SEEN_JOBS_MAX) seenJobs.delete(seenJobs.keys().next().value!);
};

/**
 * The job a token belonged to when this process last saw it live, without asking the database:
 * a token is minted for one dispatch of one job, so its job, run, project and org never change;
 * only whether it is still live does, and a caller of this must check that in its own statement
 * (see recordJournalForToken). Undefined for a token not seen yet.
 */
export const lastSeenJobOfRequest = (req: WithHeaders): (LeasedJobInScope & { digest: Buffer }) | undefined => {
  const digest = jobTokenDigestOf(req);
  const job = seenJobs.get(digest.toString("hex"));
  return job && { ...job, digest };
};

/** What a claim is about: the job behind the token, its run and project, what was read with them, and the agent that asks. */
export interface Claim {
  job: LeasedJob;
  run: RunInternal;
  project: ProjectRef;
  reads: ClaimReads;
  agentId: string;
  /** The claim's lookup already started the job and its run (a script job this process dispatched; see claimByToken). */
  started: boolean;
  /** The digest of the claim's job token: the job is taken only while it is still the live one. */
  digest: Buffer;
}

/**
 * A claim's job, its run, the run's project and the claim's reads (store's ClaimReads), in one
 * lookup; with `started`, the same round trip started the job and its run (store's claimByToken,
 * for a job this process dispatched with a start hint).
 */
export const claimOfRequest = async (
  pool: Pool,
  req: FastifyRequest,
  claim: { agentIdOf: () => string; leaseMs: number; publicUrl: string | undefined },
): Promise<Claim> => {
  const digest = jobTokenDigestOf(req);
  // The token, then its job, then the body: a dead token is job_lost whatever the body says.
  let agentId: string;
  try {
    agentId = claim.agentIdOf();
  } catch (err) {
    if (!(await jobAndRunByToken(pool, digest))) throw jobLost();
    throw err;
  }
  const found = await claimByToken(pool, { digest, agentId, leaseMs: claim.leaseMs, publicUrl: claim.publicUrl });
  if (!found?.run || !found.project) throw jobLost();
  // The claim saw the job live: its first `flow step` can take the one-statement record too.
  rememberJob(digest, { ...found.job, project_id: found.project.projectId, org_id: found.project.orgId });
  return { job: found.job, run: found.run, project: found.project, reads: found.reads, agentId, started: found.started, digest };
};

/**
 * The digest of the job token an agent request presents. No token, or a token that is not a job
 * token (a user's API token, say), is 401 `unauthenticated`; a job token whose job is gone or
 * whose lease was taken over is the caller's 409 `job_lost` (the agent ends the job on either).
 */
export const jobTokenDigestOf = (req: WithHeaders): Buffer => {
  const token = bearerOf(req);
  if (!token) throw new FlowError("unauthenticated", "the agent API needs a job token (Authorization: Bearer job_...); none was sent");
  if (tokenKindOf(token) !== "job") {
    throw new FlowError(
      "unauthenticated",
      "the agent API needs a job token (Authorization: Bearer job_...), the one minted for a job's dispatch; this is not one",
      {
        hint: "a user's API token works on /api/v1 only; /agent/v1 is for the agent running a job",
      },
    );
  }
  return digestToken(token);
};
