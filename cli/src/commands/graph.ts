/**
 * `flow graph set|ls|show|rm|requirements`: the project's stored graphs (issue 10; spec "Graph
 * requirements report"). `set` stores a draft even before its credentials exist; a graph's
 * trigger and webhook nodes get endpoints of their own, whose secrets `set` prints once (as
 * `flow event-hook set` does). `show` prints the document alone on stdout, so it round-trips.
 */
import { readFileSync } from "node:fs";
import { FlowError } from "@flowsvc/core/errors";
import { formatAge, formatDetails, formatDocument, formatTable } from "../print-format.js";
import type { Column } from "../print-format.js";
import { printList } from "../print.js";
import type { Stdio } from "../print.js";
import { listFrom } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf, jsonValueProblem } from "./parsers.js";
import type { CommandSpec } from "./spec.js";
import { shellQuote } from "../shell-quote.js";

interface GraphInfo {
  name: string;
  nodes: number;
  endpoints: number;
  created_by: string | null;
  updated_at: string;
}

interface EndpointView {
  node_id: string;
  kind: string;
  emits: string;
  ingest_url: string;
  secret?: string;
}

interface SavedGraph {
  name: string;
  nodes: number;
  endpoints: EndpointView[];
}

interface ShownGraph extends SavedGraph {
  document: unknown;
}

interface RequirementRow {
  node_id: string;
  name: string;
  required_kind?: string;
  stored_kind?: string;
  state: string;
  problem?: string;
}

interface Report {
  ready: boolean;
  credentials: RequirementRow[];
  dynamic?: Array<{ node_id: string; required_kind?: string }>;
}

/** The file's JSON, or an error naming the file and what is wrong (the server names paths inside the graph). */
const readDocument = (file: string): unknown => {
  let text: string;
  try {
    // node:fs, not node:fs/promises: no thread pool and no loading of fs/promises at start-up (issue 15).
    text = readFileSync(file, "utf8");
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message;
    throw new FlowError("invalid_argument", `cannot read ${file}: ${reason}`, { cause: err });
  }
  const hint = `\`flow check ${file}\` checks a graph without storing it`;
  let doc: unknown;
  try {
    doc = JSON.parse(text) as unknown;
  } catch (err) {
    throw new FlowError("invalid_argument", `${file}: not valid JSON: ${(err as Error).message}`, { hint });
  }
  const lost = jsonValueProblem(doc);
  if (lost !== undefined) throw new FlowError("invalid_argument", `${file}: ${lost}`, { hint });
  return doc;
};

/** What `set` prints of each endpoint: where it takes deliveries, and its secret when this save created it. */
const printEndpoints = (io: Stdio, graph: string, endpoints: readonly EndpointView[]): void => {
  for (const e of endpoints) {
    io.out(
      formatDetails([
        [`${e.kind} endpoint`, `node ${e.node_id} of graph ${graph}`],
        ["emits", e.emits],
        ["ingest URL", e.ingest_url],
        ["secret", e.secret ?? "unchanged (not shown again)"],
      ]),
    );
    if (e.secret)
      io.out(
        `sample request:\n  curl -X POST ${shellQuote(e.ingest_url)} -H ${shellQuote(`X-Flow-Hook-Secret: ${e.secret}`)} -H 'Content-Type: application/json' -d '{"hello":"world"}'`,
      );
  }
  if (endpoints.some((e) => e.secret))
    io.note("each new endpoint's secret is shown only now: the server keeps its digest alone; remove the node and save to drop it");
};

const setSpec: CommandSpec = {
  name: "set",
  description: "store a graph (create or replace; admin); a draft may name credentials that do not exist yet",
  arguments: [
    { name: "<name>", description: "the graph's name (1-40 letters, digits, _ and -)" },
    { name: "<file>", description: "the flowsvc-graph/v1 JSON document" },
  ],
  examples: ["flow graph set deploy deploy.json", "flow graph requirements deploy"],
  action: async (deps, { args: [name = "", file = ""], flags }) => {
    const document = readDocument(file);
    await withSettings(deps, flags, async (ctx) => {
      const saved = await ctx.api.call<SavedGraph>("PUT", scopedPath(ctx, "graphs", name), { document });
      ctx.io.note(`graph ${name} stored (${saved.nodes} node${saved.nodes === 1 ? "" : "s"})`);
      printEndpoints(ctx.io, name, saved.endpoints);
    });
  },
};

const LIST_COLUMNS = (now: Date): Array<Column<GraphInfo>> => [
  { header: "NAME", value: (g) => g.name },
  { header: "NODES", value: (g) => String(g.nodes) },
  { header: "ENDPOINTS", value: (g) => String(g.endpoints) },
  { header: "BY", value: (g) => g.created_by ?? "-" },
  { header: "UPDATED", value: (g) => formatAge(g.updated_at, now) },
];

const listSpec: CommandSpec = {
  name: "ls",
  aliases: ["list"],
  description: "list the project's stored graphs (viewer)",
  options: [OUTPUT_OPTION],
  examples: ["flow graph ls", "flow graph ls -o json"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const rows = listFrom<GraphInfo>(await ctx.api.call("GET", scopedPath(ctx, "graphs")), ["graphs"]);
      printList(ctx.io, formatOf(opts), rows, { columns: LIST_COLUMNS(ctx.now), empty: "no stored graphs" });
    });
  },
};

const showSpec: CommandSpec = {
  name: "show",
  description: "print a stored graph's document (viewer); its endpoints are listed on stderr",
  arguments: [{ name: "<name>", description: "the graph's name" }],
  examples: ["flow graph show deploy > deploy.json"],
  action: async (deps, { args: [name = ""], flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const g = await ctx.api.call<ShownGraph>("GET", scopedPath(ctx, "graphs", name));
      ctx.io.out(JSON.stringify(g.document, null, 2));
      for (const e of g.endpoints) ctx.io.note(`${e.kind} endpoint of node ${e.node_id}: ${e.ingest_url} (emits ${e.emits})`);
    });
  },
};

const rmSpec: CommandSpec = {
  name: "rm",
  description: "remove a stored graph and its endpoints (admin); runs already started keep their graph",
  arguments: [{ name: "<name>", description: "the graph's name" }],
  examples: ["flow graph rm deploy"],
  action: async (deps, { args: [name = ""], flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      await ctx.api.call("DELETE", scopedPath(ctx, "graphs", name));
      ctx.io.note(`graph ${name} removed`);
    });
  },
};

const REQUIREMENT_COLUMNS: ReadonlyArray<Column<RequirementRow>> = [
  { header: "NODE", value: (r) => r.node_id },
  { header: "NAME", value: (r) => r.name },
  { header: "REQUIRED KIND", value: (r) => r.required_kind ?? "any" },
  { header: "STORED KIND", value: (r) => r.stored_kind ?? "-" },
  { header: "STATE", value: (r) => r.state },
];

const printReport = (io: Stdio, name: string, report: Report): void => {
  if (report.credentials.length > 0) io.out(formatTable(REQUIREMENT_COLUMNS, report.credentials));
  for (const d of report.dynamic ?? [])
    io.note(`node ${d.node_id}: the credential's name is an expression; it is checked when the node runs`);
  for (const r of report.credentials) if (r.problem) io.note(`${r.node_id}: ${r.problem}`);
  io.note(
    report.credentials.length === 0
      ? `graph ${name} names no credentials`
      : report.ready
        ? `graph ${name} is ready: every credential it names is ok`
        : `graph ${name} is not ready: a submit of it is refused until every credential is ok`,
  );
};

const requirementsSpec: CommandSpec = {
  name: "requirements",
  description:
    "show each credential a stored graph names and its state: ok, missing, wrong_kind, conflict, needs_reconnect (viewer); exits 1 when the graph is not ready",
  arguments: [{ name: "<name>", description: "the graph's name" }],
  options: [{ flags: "--json", description: "print the report as the API answers it" }],
  examples: [
    "flow graph requirements deploy",
    "flow graph requirements deploy --json | jq .ready",
    "flow graph requirements deploy >/dev/null && flow submit deploy.json",
  ],
  // The report is printed either way; a graph that is not ready exits 1 (as `terraform validate` or
  // `kubectl wait` fail), so a script can gate a submit on it.
  action: async (deps, { args: [name = ""], opts, flags }) => {
    const report = await withSettings(deps, flags, (ctx) => ctx.api.call<Report>("GET", scopedPath(ctx, "graphs", name, "requirements")));
    if (opts["json"]) deps.io.out(formatDocument(report, "json"));
    else printReport(deps.io, name, report);
    if (report.ready !== true) deps.setExitCode(1);
  },
};

export const graphSpec: CommandSpec = {
  name: "graph",
  description: "manage the project's stored graphs (flowsvc-graph/v1 JSON documents)",
  subcommands: [setSpec, listSpec, showSpec, rmSpec, requirementsSpec],
  examples: ["flow graph set deploy deploy.json", "flow graph ls", "flow graph requirements deploy"],
};
