/** `flow runs ls`: the project's recent runs, newest first. */
import { formatAge, formatElapsed } from "../print-format.js";
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import { withQuery } from "../http.js";
import { listFrom } from "./api-types.js";
import type { RunRecord } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import { OUTPUT_OPTION, formatOf, parsePositiveInt } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

interface RunsOptions {
  status?: string;
  tag?: string;
  limit?: number;
  output?: string;
}

export const runColumns = (now: Date): Array<Column<RunRecord>> => [
  { header: "ID", value: (r) => r.id },
  { header: "STATUS", value: (r) => r.status },
  { header: "SUBSTATE", value: (r) => r.substate?.name ?? "-" },
  { header: "FILE", value: (r) => r.filename ?? "-" },
  { header: "TAGS", value: (r) => (r.tags?.length ? r.tags.join(",") : "-") },
  { header: "CREATED", value: (r) => formatAge(r.created_at, now) },
  { header: "DURATION", value: (r) => formatElapsed(r.started_at, r.finished_at, now) },
];

const listRunsSpec: CommandSpec = {
  name: "ls",
  aliases: ["list"],
  description: "list the project's runs, newest first",
  options: [
    { flags: "--status <status>", description: "only runs in this status (queued, running, parked, succeeded, failed, cancelled)" },
    { flags: "--tag <tag>", description: "only runs with this tag" },
    { flags: "--limit <n>", description: "at most this many runs", parse: parsePositiveInt },
    OUTPUT_OPTION,
  ],
  examples: ["flow runs ls", "flow runs ls --status failed --limit 5", "flow runs ls --tag deploy -o json"],
  action: async (deps, { opts, flags }) => {
    const { status, tag, limit } = opts as RunsOptions;
    await withSettings(deps, flags, async (ctx) => {
      const path = withQuery(scopedPath(ctx, "runs"), { status, tag, limit });
      const runs = listFrom<RunRecord>(await ctx.api.call("GET", path), ["runs"]);
      printList(ctx.io, formatOf(opts), runs, { columns: runColumns(ctx.now), empty: "no runs" });
    });
  },
};

export const runsSpec: CommandSpec = {
  name: "runs",
  description: "inspect the project's runs",
  subcommands: [listRunsSpec],
  examples: ["flow runs ls --status running"],
};
