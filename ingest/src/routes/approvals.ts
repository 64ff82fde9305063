/**
 * Approval gates over HTTP (spec, "Approval gates and model-assisted deploys", "Authentication" 3;
 * SECURITY.md "Approval gates"):
 *
 * - `POST {scoped}/runs/<run>/approvals/<gate>` with `{decision, fields}` answers the gate the run
 *   is parked on. User authentication only: `authorize` takes a person's API token, so a job token,
 *   a hook secret or an agent's credential is refused (401) and the run stays parked. The run must
 *   be parked on that gate (409 otherwise: not parked, or already answered). An `approve` is
 *   checked with core's checkApprovalFields against the gate's declared fields (a missing required
 *   field is refused with exactly `approval field "<name>" is required` and the schema; nothing is
 *   delivered); a `reject` needs no field (given ones are still checked) and fails the gate. The
 *   answer is then the signal named after the gate, payload `{decision, ...fields, approved_by}`,
 *   delivered through store's deliverSignal in the same transaction: the approver is recorded in
 *   the node's output and as the signal's sender.
 * - `GET {scoped}/runs/<run>/approvals` lists the gates the run is parked on, with their prompt and
 *   fields: what `flow approve` prompts for.
 */
import { z } from "zod";
import type { FastifyPluginCallback } from "fastify";
import type { PoolClient } from "pg";
import {
  FlowError,
  NODE_ID,
  checkApprovalFields,
  isGraphEngineWorkflow,
  parseApprovalFields,
  parseGraphText,
  type ApprovalField,
} from "@flowsvc/core";
import {
  deliverSignal,
  gateAnsweredBy,
  getRunView,
  lockGateNode,
  lockRunForGate,
  parkedGates,
  withTransaction,
  type GateRow,
} from "@flowsvc/store";
import { authorize } from "../auth.js";
import type { RouteDeps } from "../deps.js";
import { api } from "../openapi/route-doc.js";

const RunParams = z.object({ org: z.string(), project: z.string(), id: z.string().min(1).max(64) });
const GateParams = RunParams.extend({
  gate: z.string().regex(NODE_ID, "a gate is an approval node's id: a letter or _, then letters, digits, _ and -, at most 64"),
});
/** At most this many fields in an answer (a gate declares at most 32): a huge object is refused before it is walked. */
const ANSWER_FIELDS_MAX = 64;
const ApprovalBody = z
  .object({
    decision: z.enum(["approve", "reject"], { error: 'must be "approve" or "reject"' }),
    fields: z
      .record(z.string(), z.unknown())
      .refine((f) => Object.keys(f).length <= ANSWER_FIELDS_MAX, `at most ${ANSWER_FIELDS_MAX} fields`)
      .default({}),
  })
  .strict();

/** The fields a gate declared: as parked (its evaluated config), else as the run's graph document declares them. */
const declaredFields = (gate: GateRow, source: string): ApprovalField[] => {
  let declared = gate.substate?.fields;
  if (declared === undefined) {
    // Fail closed: a source that no longer parses is no gate without fields.
    const graph = parseGraphText(source);
    if (!graph.ok) throw new FlowError("internal", `the graph of gate ${gate.node_id} does not parse: ${graph.problems[0]?.message}`);
    declared = graph.graph.nodes.find((n) => n.id === gate.node_id)?.config["fields"];
  }
  const parsed = parseApprovalFields(declared, "fields");
  if (!parsed.ok) throw new FlowError("internal", `gate ${gate.node_id} declares fields that do not parse: ${parsed.problems[0]?.message}`);
  return parsed.fields;
};

/** The gate, locked, when the run is parked on it; each other case throws with what is wrong. */
const parkedGate = async (tx: PoolClient, runId: string, gate: string): Promise<GateRow> => {
  const row = await lockGateNode(tx, runId, gate);
  if (!row || row.type !== "approval") throw new FlowError("not_found", `run ${runId} has no approval gate ${JSON.stringify(gate)}`);
  if (row.status !== "parked") throw new FlowError("conflict", `run ${runId} is not parked on gate ${gate} (the gate is ${row.status})`);
  // Parked, but an answer may already be on its way to the engine: a second answer changes nothing.
  const answered = await gateAnsweredBy(tx, runId, gate, row.started_at);
  if (answered)
    throw new FlowError("conflict", `gate ${gate} of run ${runId} was already answered${answered.sentBy ? ` by ${answered.sentBy}` : ""}`);
  return row;
};

/** Checks the answer against the declared fields; a reject requires none. Throws the exact refusal. */
const checkedFields = (
  decision: "approve" | "reject",
  declared: ApprovalField[],
  given: Record<string, unknown>,
): Record<string, unknown> => {
  const fields = decision === "reject" ? declared.map((f) => ({ ...f, required: false })) : declared;
  const checked = checkApprovalFields(fields, given);
  if (!checked.ok) throw new FlowError("invalid_argument", checked.message, { details: { fields: declared } });
  return checked.output;
};

export const approvalRoutes: FastifyPluginCallback<RouteDeps> = (app, deps, done) => {
  const { pool } = deps;
  const base = "/api/v1/orgs/:org/projects/:project/runs/:id/approvals";

  app.post(
    `${base}/:gate`,
    api({
      summary: "Answer the approval gate a run is parked on (a person's API token only: never a job's)",
      tag: "approvals",
      auth: "member",
      params: GateParams,
      body: ApprovalBody,
      errors: [409],
    }),
    async (req) => {
      const scope = await authorize(pool, req, "member");
      const { id, gate } = GateParams.parse(req.params);
      const { decision, fields } = ApprovalBody.parse(req.body ?? {});
      const approvedBy = scope.caller.userName;
      return withTransaction(pool, async (tx) => {
        const run = await lockRunForGate(tx, scope.projectId, id);
        if (!run) throw new FlowError("not_found", `run ${id} not found in ${scope.org}/${scope.project}`);
        if (!isGraphEngineWorkflow(run.workflow))
          throw new FlowError("conflict", `run ${id} is not a graph or pipeline run: it has no approval gates`);
        const row = await parkedGate(tx, id, gate);
        const output = checkedFields(decision, declaredFields(row, run.source), fields);
        const payload = { decision, ...output, approved_by: approvedBy };
        const { delivered } = await deliverSignal(tx, id, { name: gate, payload, sentBy: approvedBy });
        return { run_id: id, gate, decision, approved_by: approvedBy, fields: output, delivered };
      });
    },
  );

  app.get(
    base,
    api({ summary: "The gates a run is parked on, with their prompts and fields", tag: "approvals", auth: "viewer", params: RunParams }),
    async (req) => {
      const scope = await authorize(pool, req, "viewer");
      const { id } = RunParams.parse(req.params);
      if (!(await getRunView(pool, scope.projectId, id)))
        throw new FlowError("not_found", `run ${id} not found in ${scope.org}/${scope.project}`);
      const rows = await parkedGates(pool, id);
      const gates = rows.map((r) => ({
        gate: r.node_id,
        prompt: typeof r.substate?.prompt === "string" ? r.substate.prompt : `Approve ${r.node_id}?`,
        fields: declaredFields(r, r.source),
        parked_since: r.started_at?.toISOString() ?? null,
        ...(typeof r.substate?.deadline_ms === "number" ? { deadline_ms: r.substate.deadline_ms } : {}),
      }));
      return { run_id: id, gates };
    },
  );
  done();
};
