import type { PoolClient } from "pg";
import { FlowError, isTerminalStatus } from "@flowsvc/core";
import { completeRun } from "./run-lifecycle.js";
import { cancelGraphNodes } from "./graph-runs.js";

/**
 * Cancels a run: every live job's token is revoked (its agent's next call or heartbeat answers
 * job_lost, and the agent ends the script), queued jobs are dropped, leases are released, and
 * `run.cancelled` is appended with the reason.
 */
export const cancelRun = async (tx: PoolClient, runId: string, reason: string, publicUrl: string | undefined): Promise<void> => {
  const { rows } = await tx.query<{ status: string }>(`select status from runs where id = $1 for update`, [runId]);
  const status = rows[0]?.status;
  if (!status) throw new FlowError("not_found", `run ${runId} not found`);
  if (isTerminalStatus(status)) throw new FlowError("conflict", `run ${runId} has already ended: it is ${status}`);
  await tx.query(
    `update jobs set status = 'done', token_digest = null, lease_expires_at = null, updated_at = now()
      where run_id = $1 and status in ('queued', 'dispatched', 'running')`,
    [runId],
  );
  await tx.query(
    `update activities set status = 'failed', error = 'the run was cancelled', finished_at = now() where run_id = $1 and status in ('queued', 'running')`,
    [runId],
  );
  // A graph run's nodes not yet ended are cancelled (the driver aborts the ones running in it).
  await cancelGraphNodes(tx, runId);
  await completeRun(tx, runId, { status: "cancelled", reason }, publicUrl);
};
