/** `flow steps <run>`: the run's journal, one line per durable call. */
import { Command } from "commander";
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import { listFrom } from "./api-types.js";
import type { StepRecord } from "./api-types.js";
import { scopedPath, withApi } from "./context.js";
import type { CommandDeps } from "./context.js";
import { examples, formatOf, outputOption } from "./options.js";

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

export const stepsCommand = (deps: CommandDeps): Command =>
  new Command("steps")
    .description("list a run's recorded durable calls: position, kind, name#ordinal, status, exit code, bytes of output")
    .argument("<run>", "the run id")
    .addOption(outputOption())
    .addHelpText("after", examples("flow steps run-01jd8k2m3n4p5q6r7s8t9v0w1x", 'flow steps "$run" -o yaml'))
    .action(async (id: string, opts: { output?: string }, cmd: Command) => {
      await withApi(deps, cmd, async (ctx) => {
        const steps = listFrom<StepRecord>(await ctx.api.call("GET", scopedPath(ctx, "runs", id, "steps")), [
          "steps",
          "journal",
          "entries",
        ]);
        printList(ctx.io, formatOf(opts), steps, { columns: STEP_COLUMNS, empty: `no recorded steps in ${id}` });
      });
    });
