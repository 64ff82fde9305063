/** `flow runs ls`: the project's recent runs, newest first. */
import { Command } from "commander";
import { formatAge, formatElapsed } from "../print-format.js";
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import { withQuery } from "../http.js";
import { listFrom } from "./api-types.js";
import type { RunRecord } from "./api-types.js";
import { scopedPath, withApi } from "./context.js";
import type { CommandDeps } from "./context.js";
import { examples, formatOf, outputOption, parsePositiveInt } from "./options.js";

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

const listRunsCommand = (deps: CommandDeps): Command =>
  new Command("ls")
    .alias("list")
    .description("list the project's runs, newest first")
    .option("--status <status>", "only runs in this status (queued, running, parked, succeeded, failed, cancelled)")
    .option("--tag <tag>", "only runs with this tag")
    .option("--limit <n>", "at most this many runs", parsePositiveInt)
    .addOption(outputOption())
    .addHelpText("after", examples("flow runs ls", "flow runs ls --status failed --limit 5", "flow runs ls --tag deploy -o json"))
    .action(async (opts: RunsOptions, cmd: Command) => {
      await withApi(deps, cmd, async (ctx) => {
        const path = withQuery(scopedPath(ctx, "runs"), { status: opts.status, tag: opts.tag, limit: opts.limit });
        const runs = listFrom<RunRecord>(await ctx.api.call("GET", path), ["runs"]);
        printList(ctx.io, formatOf(opts), runs, { columns: runColumns(ctx.now), empty: "no runs" });
      });
    });

export const runsCommand = (deps: CommandDeps): Command =>
  new Command("runs")
    .description("inspect the project's runs")
    .addCommand(listRunsCommand(deps))
    .addHelpText("after", examples("flow runs ls --status running"));
