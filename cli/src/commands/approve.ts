/**
 * `flow approve <run> [<gate>] [--field name=value]... [--reject]`: answer the approval gate a
 * graph run is parked on (spec, "Approval gates and model-assisted deploys"; the approvals route,
 * ingest/src/routes/approvals.ts, is the one that decides).
 *
 * Without a gate it answers the one the run is parked on (`GET .../approvals` lists them). On a
 * terminal (stdin a TTY) it shows the gate's prompt and asks for each declared field not given with
 * `--field`: text on one line, textarea over lines until a blank line or end of input, select by
 * number or name from its numbered options; an empty answer takes the default shown. Without a
 * terminal nothing is asked: the server refuses a missing required field with `approval field
 * "<name>" is required` and the field schema, and the run stays parked.
 *
 * Client command: no zod, no server module (cli/src/bin/flow-imports.test.ts); readline is loaded
 * only to prompt.
 */
import { FlowError } from "@flowsvc/core/errors";
import { parseFieldFlags, type ApprovalField } from "@flowsvc/core/graph/approval-fields";
import type { Stdio } from "../print.js";
import { scopedPath, withSettings } from "./context.js";
import type { CommandContext } from "./context.js";
import { collectList } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

interface ParkedGate {
  gate: string;
  prompt: string;
  fields: ApprovalField[];
}

interface ApprovalAnswer {
  run_id: string;
  gate: string;
  decision: string;
  approved_by: string;
  fields: Record<string, unknown>;
}

interface ApproveOptions {
  field?: string[];
  reject?: boolean;
}

/** Asks one question, answers the line typed (without its newline), or undefined at end of input. */
export type LineReader = (question: string) => Promise<string | undefined>;

/** The gate to answer: the one named, or the only one the run is parked on. */
const pickGate = (runId: string, gates: readonly ParkedGate[], named: string | undefined): ParkedGate | undefined => {
  if (named !== undefined) return gates.find((g) => g.gate === named);
  if (gates.length === 1) return gates[0];
  if (gates.length === 0) throw new FlowError("conflict", `run ${runId} is not parked on an approval gate`);
  throw new FlowError(
    "invalid_argument",
    `run ${runId} is parked on ${gates.length} gates (${gates.map((g) => g.gate).join(", ")}): name one`,
    {
      hint: `flow approve ${runId} ${gates[0]!.gate}`,
    },
  );
};

const title = (field: ApprovalField): string => `${field.label ?? field.name}${field.required ? " (required)" : ""}`;

const shownDefault = (field: ApprovalField): string => (field.default ? ` [${field.default}]` : "");

/**
 * End of input (Ctrl-D) at a text or select question: the person stopped, so nothing is sent and the
 * gate still waits. Leaving the field to its default would approve what nobody chose.
 */
const stopped = (field: ApprovalField): FlowError =>
  new FlowError("invalid_argument", `end of input at the question for ${field.name}: nothing was sent; the gate still waits`, {
    hint: "answer each question (Enter takes the default shown), or give the fields with --field",
  });

const askText = async (field: ApprovalField, read: LineReader): Promise<string> => {
  const line = await read(`${title(field)}${shownDefault(field)}: `);
  if (line === undefined) throw stopped(field);
  return line;
};

const askTextarea = async (field: ApprovalField, read: LineReader): Promise<string | undefined> => {
  const lines: string[] = [];
  let line = await read(`${title(field)}${shownDefault(field)} (end with a blank line or Ctrl-D):\n`);
  while (line !== undefined && line !== "") {
    lines.push(line);
    line = await read("");
  }
  return lines.length > 0 ? lines.join("\n") : undefined;
};

/** A select's answer: its number or its text (Enter: the default); anything else is asked again; end of input stops. */
const askSelect = async (field: ApprovalField, read: LineReader, io: Stdio): Promise<string | undefined> => {
  const options = field.options ?? [];
  io.note(`${title(field)}:`);
  options.forEach((o, i) => io.note(`  ${i + 1}) ${o}${o === field.default ? " (default)" : ""}`));
  for (;;) {
    const line = await read(`choose 1-${options.length}${shownDefault(field)}: `);
    if (line === undefined) throw stopped(field);
    if (line.trim() === "") return undefined;
    const n = Number(line.trim());
    if (Number.isInteger(n) && n >= 1 && n <= options.length) return options[n - 1];
    if (options.includes(line.trim())) return line.trim();
    io.note(`"${line.trim()}" is not one of the options`);
  }
};

/**
 * Asks for each declared field not already given, in declaration order. An empty answer leaves the
 * field out (the server applies its default, or refuses a required one); end of input at a text or
 * select question stops with nothing sent (a textarea's ends its text, as its question says).
 */
export const promptFields = async (
  gate: ParkedGate,
  given: Readonly<Record<string, string>>,
  read: LineReader,
  io: Stdio,
): Promise<Record<string, string>> => {
  const out = new Map(Object.entries(given));
  io.note(gate.prompt);
  for (const field of gate.fields) {
    if (out.has(field.name)) continue;
    const value =
      field.type === "select"
        ? await askSelect(field, read, io)
        : field.type === "textarea"
          ? await askTextarea(field, read)
          : await askText(field, read);
    if (value !== undefined && value !== "") out.set(field.name, value);
  }
  return Object.fromEntries(out);
};

/** A LineReader on the terminal: questions on stderr, answers line by line from stdin. */
const terminalReader = async (): Promise<{ read: LineReader; close: () => void }> => {
  const { createInterface } = await import("node:readline");
  const rl = createInterface({ input: process.stdin, terminal: false });
  const lines = rl[Symbol.asyncIterator]();
  return {
    read: async (question) => {
      if (question !== "") process.stderr.write(question);
      const next = await lines.next();
      return next.done ? undefined : String(next.value);
    },
    close: () => rl.close(),
  };
};

const answer = async (ctx: CommandContext, runId: string, gateName: string, body: { decision: string; fields: Record<string, string> }) =>
  ctx.api.call<ApprovalAnswer>("POST", `${scopedPath(ctx, "runs", runId, "approvals", gateName)}`, body);

export const approveSpec: CommandSpec = {
  name: "approve",
  description: "answer the approval gate a graph run is parked on; on a terminal, asks for each declared field",
  arguments: [
    { name: "<run>", description: "the run id" },
    { name: "[gate]", description: "the gate (the approval node's id); default: the one the run is parked on" },
  ],
  options: [
    { flags: "--field <name=value>", description: "a declared field's value (repeatable)", parse: collectList },
    { flags: "--reject", description: "reject instead of approve: the gate fails and the run with it" },
  ],
  examples: [
    'flow approve "$run"',
    'flow approve "$run" review --field reason="tests pass" --field env=production',
    'flow approve "$run" --reject',
  ],
  action: async (deps, { args: [runId = "", gateName], opts: options, flags: settingFlags }) => {
    const opts = options as ApproveOptions;
    const flags = parseFieldFlags(opts.field ?? []);
    if (!flags.ok) throw new FlowError("invalid_argument", flags.message);
    await withSettings(deps, settingFlags, async (ctx) => {
      const { gates } = await ctx.api.call<{ gates: ParkedGate[] }>("GET", scopedPath(ctx, "runs", runId, "approvals"));
      const gate = pickGate(runId, gates, gateName);
      let fields = flags.fields;
      if (gate && ctx.io.stdinIsTty() && !opts.reject) {
        const terminal = await terminalReader();
        try {
          fields = await promptFields(gate, fields, terminal.read, ctx.io);
        } finally {
          terminal.close();
        }
      }
      // A gate not in the list (not parked, answered, no such gate) is the server's to refuse, by name.
      const res = await answer(ctx, runId, gate?.gate ?? gateName ?? "", { decision: opts.reject ? "reject" : "approve", fields });
      ctx.io.out(`${res.decision === "reject" ? "rejected" : "approved"} gate ${res.gate} of run ${res.run_id} as ${res.approved_by}`);
      for (const [k, v] of Object.entries(res.fields)) ctx.io.out(`  ${k}: ${JSON.stringify(v)}`);
    });
  },
};
