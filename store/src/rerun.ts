import type { PoolClient } from "pg";
import { FlowError, isGraphEngineWorkflow, parseSite, trustOf } from "@flowsvc/core";
import { copyRunCredentials } from "./credentials.js";
import { createRun } from "./run-lifecycle.js";
import { getRunInternal } from "./runs.js";

/**
 * `flow rerun <run> --from <site>`: a fresh run of the same recorded source, env and tags that
 * keeps the recorded calls before the site's position and runs the script from line one. When the
 * kept prefix no longer reproduces, the replay fails with the determinism error. A rerun of an
 * untrusted run is untrusted.
 */
export const createRerun = async (
  tx: PoolClient,
  r: { projectId: string; runId: string; site: string; createdBy: string },
): Promise<string> => {
  const { projectId, runId, createdBy } = r;
  const source = await getRunInternal(tx, runId);
  if (!source || source.project_id !== projectId) throw new FlowError("not_found", `run ${runId} not found`);
  if (isGraphEngineWorkflow(source.workflow))
    throw new FlowError(
      "invalid_argument",
      `run ${runId} is a ${source.workflow} run: flow rerun replays a script's steps; submit the graph or pipeline again`,
    );
  const { name, ordinal } = parseSite(r.site);
  const { rows } = await tx.query<{ position: number }>(
    `select position from journal where run_id = $1 and kind = 'step' and name = $2 and ordinal = $3`,
    [runId, name, ordinal],
  );
  const at = rows[0]?.position;
  if (at === undefined) {
    throw new FlowError("not_found", `run ${runId} has no recorded step ${name}#${ordinal}`, {
      hint: `list its steps with \`flow steps ${runId}\``,
    });
  }
  const pending = await tx.query(`select 1 from journal where run_id = $1 and position < $2 and status <> 'done'`, [runId, at]);
  if ((pending.rowCount ?? 0) > 0)
    throw new FlowError("conflict", `run ${runId} has calls before ${name}#${ordinal} that never completed; rerun from an earlier step`);
  const created = await createRun(tx, {
    projectId,
    workflow: source.workflow,
    source: source.source,
    filename: source.filename,
    interpreter: source.interpreter,
    env: source.env,
    tags: source.tags,
    trigger: { type: "manual" },
    createdBy,
    rerunOf: runId,
    // It replays the source run's script and recorded results: as trusted as that run, even at a person's request.
    trusted: trustOf({ by: "run", run: source }),
  });
  await copyRunCredentials(tx, runId, created.id);
  await tx.query(
    `insert into journal (run_id, position, kind, name, ordinal, status, result, created_at, resolved_at, deadline, args)
     select $1, position, kind, name, ordinal, status, result, created_at, resolved_at, deadline, args from journal where run_id = $2 and position < $3`,
    [created.id, runId, at],
  );
  return created.id;
};
