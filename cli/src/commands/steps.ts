/** `flow steps <run>`: the run's journal, one line per durable call. */
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import { listFrom } from "./api-types.js";
import type { NodeRecord, StepRecord } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

/** Bytes of recorded stdout, from its base64 length (no decoding). */
export const base64Bytes = (b64: string): number => {
  const clean = b64.replace(/\s/g, "");
  const padding = clean.endsWith("==") ? 2 : clean.endsWith("=") ? 1 : 0;
  return Math.floor((clean.length * 3) / 4) - padding;
};

const exitOf = (s: StepRecord): number | undefined => s.exit_code ?? s.result?.exit ?? undefined;

const bytesOf = (s: StepRecord): number | undefined => {
  if (typeof s.output_bytes === "number") return s.output_bytes;
  return typeof s.result?.stdout_b64 === "string" ? base64Bytes(s.result.stdout_b64) : undefined;
};

export const STEP_COLUMNS: ReadonlyArray<Column<StepRecord>> = [
  { header: "POS", value: (s) => String(s.position) },
  { header: "KIND", value: (s) => s.kind },
  { header: "NAME", value: (s) => `${s.name}#${s.ordinal}` },
  { header: "STATUS", value: (s) => s.status },
  { header: "EXIT", value: (s) => String(exitOf(s) ?? "-") },
  { header: "BYTES", value: (s) => String(bytesOf(s) ?? "-") },
];

/** A node's output in a few characters: its JSON, cut short. */
export const shortOutput = (output: unknown, width = 60): string => {
  if (output === undefined || output === null) return "-";
  const text = JSON.stringify(output);
  return text.length > width ? `${text.slice(0, width - 3)}...` : text;
};

/** A graph run's steps are its nodes. */
export const NODE_COLUMNS: ReadonlyArray<Column<NodeRecord>> = [
  { header: "NODE", value: (n) => n.node_id },
  { header: "TYPE", value: (n) => n.type },
  { header: "STATUS", value: (n) => n.status },
  { header: "ATTEMPT", value: (n) => String(n.attempt) },
  { header: "OUTPUT", value: (n) => (n.error ? `error: ${n.error}` : shortOutput(n.output)) },
];

const isNode = (x: StepRecord | NodeRecord): x is NodeRecord => typeof x === "object" && x !== null && "node_id" in x;

export const stepsSpec: CommandSpec = {
  name: "steps",
  description:
    "list a run's recorded durable calls (position, kind, name#ordinal, status, exit code, bytes of output), or a graph run's nodes (status, attempt, output)",
  arguments: [{ name: "<run>", description: "the run id" }],
  options: [OUTPUT_OPTION],
  examples: ["flow steps run-01jd8k2m3n4p5q6r7s8t9v0w1x", 'flow steps "$run" -o yaml'],
  action: async (deps, { args: [id = ""], opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const steps = listFrom<StepRecord | NodeRecord>(await ctx.api.call("GET", scopedPath(ctx, "runs", id, "steps")), [
        "steps",
        "journal",
        "entries",
      ]);
      const nodes = steps.filter(isNode);
      if (nodes.length > 0 && nodes.length === steps.length) printList(ctx.io, formatOf(opts), nodes, { columns: NODE_COLUMNS, empty: "" });
      else printList(ctx.io, formatOf(opts), steps as StepRecord[], { columns: STEP_COLUMNS, empty: `no recorded steps in ${id}` });
    });
  },
};
