/** `flow status <run>`: one run's state, including the substate of the activity it is parked on. */
import { formatDetails, formatDocument, formatTime } from "../print-format.js";
import type { RunRecord } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

const block = (value: unknown): string => (value === undefined || value === null ? "-" : JSON.stringify(value, null, 2));

const annotationText = (a: unknown): string => {
  const markdown = (a as { markdown?: unknown } | null)?.markdown;
  return typeof markdown === "string" ? markdown : JSON.stringify(a);
};

/** The Activities (fan-out) panel: name, status, exit code. */
const activityLines = (list: RunRecord["activities"]): string =>
  list?.length ? list.map((a) => `${a.name}  ${a.status}${a.exit_code === null ? "" : `  exit ${a.exit_code}`}`).join("\n") : "-";

/** The Nodes panel of a graph run: id, type, status (a parked node's wait kind), attempt, error. */
const nodeLines = (list: NonNullable<RunRecord["nodes"]>): string =>
  list
    .map((n) => {
      const wait = n.status === "parked" && n.substate?.kind ? ` (${n.substate.kind})` : "";
      const attempt = n.attempt > 1 ? `  attempt ${n.attempt}` : "";
      return `${n.node_id}  ${n.type}  ${n.status}${wait}${attempt}${n.error ? `  ${n.error}` : ""}`;
    })
    .join("\n");

/** A graph run's approval gates: who answered each (the approver is recorded in the gate's output), or that it waits. */
const approvalLines = (nodes: RunRecord["nodes"]): Array<[string, string]> => {
  const gates = (nodes ?? []).filter((n) => n.type === "approval");
  if (gates.length === 0) return [];
  const line = (n: NonNullable<RunRecord["nodes"]>[number]): string => {
    const out = (n.output ?? {}) as { decision?: unknown; approved_by?: unknown; timed_out?: unknown };
    if (out.timed_out === true) return `${n.node_id}  timed out`;
    if (typeof out.approved_by === "string")
      return `${n.node_id}  ${out.decision === "reject" ? "rejected" : "approved"} by ${out.approved_by}`;
    return `${n.node_id}  ${n.status}`;
  };
  return [["approvals", gates.map(line).join("\n")]];
};

/** The run's workflow type and the file it came from: `flowsvc/pipeline/v1 (ci.yaml)`. */
const workflowText = (run: RunRecord): string => {
  if (!run.workflow) return "-";
  return run.filename ? `${run.workflow} (${run.filename})` : run.workflow;
};

/** The status table: one `key: value` line per field (the workflow type with the file it came from), times as ISO with their age. */
export const formatRunDetails = (run: RunRecord, now: Date): string => {
  const substate = run.substate?.name ? `${run.substate.name}${run.substate.kind ? ` (${run.substate.kind})` : ""}` : "-";
  const annotations = run.annotations?.length
    ? run.annotations.map((a) => `- ${annotationText(a).replace(/\n/g, "\n  ")}`).join("\n")
    : "-";
  return formatDetails([
    ["id", run.id],
    ["status", run.status],
    ["workflow", workflowText(run)],
    ["substate", substate],
    ["deadline", formatTime(run.deadline, now)],
    ["created", formatTime(run.created_at, now)],
    ["started", formatTime(run.started_at, now)],
    ["finished", formatTime(run.finished_at, now)],
    ["output", block(run.output)],
    ["error", run.error ?? "-"],
    ...(run.retry ? [["attempt", `${run.attempt ?? 1} of ${run.retry.attempts}`] as [string, string]] : []),
    ...(run.rerun_of ? [["rerun of", run.rerun_of] as [string, string]] : []),
    ...(run.parent_run_id ? [["spawned by", run.parent_run_id] as [string, string]] : []),
    ...(run.nodes
      ? [["nodes", nodeLines(run.nodes)] as [string, string]]
      : [["activities", activityLines(run.activities)] as [string, string]]),
    ...approvalLines(run.nodes),
    ["annotations", annotations],
  ]);
};

export const statusSpec: CommandSpec = {
  name: "status",
  description: "show a run: status, substate (what a parked run waits on), times, output, error, annotations",
  arguments: [{ name: "<run>", description: "the run id" }],
  options: [OUTPUT_OPTION],
  examples: ["flow status run-01jd8k2m3n4p5q6r7s8t9v0w1x", 'flow status "$run" -o json | jq -r .status'],
  action: async (deps, { args: [id = ""], opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const run = await ctx.api.call<RunRecord>("GET", scopedPath(ctx, "runs", id));
      const format = formatOf(opts);
      ctx.io.out(format === "table" ? formatRunDetails(run, ctx.now) : formatDocument(run, format));
    });
  },
};
