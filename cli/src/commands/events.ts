/** `flow events ls|show`: the project's event bus, newest first, and one full event. */
import { Command } from "commander";
import { formatAge, formatDetails, formatDocument, formatJsonCell, formatTable, formatTime } from "../print-format.js";
import type { Column } from "../print-format.js";
import { withQuery } from "../http.js";
import { listFrom } from "./api-types.js";
import type { EventRecord } from "./api-types.js";
import { scopedPath, withApi } from "./context.js";
import type { CommandDeps } from "./context.js";
import { examples, formatOf, outputOption, parsePositiveInt } from "./options.js";

export const eventColumns = (now: Date): Array<Column<EventRecord>> => [
  { header: "ID", value: (e) => e.id },
  { header: "TYPE", value: (e) => e.type },
  { header: "KEY", value: (e) => e.key ?? "-" },
  { header: "CREATED", value: (e) => formatAge(e.created_at, now) },
  { header: "PAYLOAD", value: (e) => formatJsonCell(e.payload) },
];

/** One event for people: its fields, then the payload as indented JSON. */
export const formatEventDetails = (event: EventRecord & Record<string, unknown>, now: Date): string => {
  const known = new Set(["id", "type", "key", "created_at", "payload"]);
  const extra = Object.entries(event)
    .filter(([k, v]) => !known.has(k) && v !== null && v !== undefined)
    .map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)] as const);
  return formatDetails([
    ["id", event.id],
    ["type", event.type],
    ["key", event.key ?? "-"],
    ["created", formatTime(event.created_at, now)],
    ...extra,
    ["payload", JSON.stringify(event.payload ?? null, null, 2)],
  ]);
};

const listEventsCommand = (deps: CommandDeps): Command =>
  new Command("ls")
    .alias("list")
    .description("list recent events, newest first")
    .option("--type <type>", "only events of this type")
    .option("--limit <n>", "at most this many events", parsePositiveInt)
    .addOption(outputOption())
    .addHelpText("after", examples("flow events ls", "flow events ls --type deploy.finished --limit 5 -o json"))
    .action(async (opts: { type?: string; limit?: number; output?: string }, cmd: Command) => {
      await withApi(deps, cmd, async (ctx) => {
        const path = withQuery(scopedPath(ctx, "events"), { type: opts.type, limit: opts.limit });
        const events = listFrom<EventRecord>(await ctx.api.call("GET", path), ["events"]);
        const format = formatOf(opts);
        if (format !== "table") ctx.io.out(formatDocument(events, format));
        else if (events.length === 0) ctx.io.note("no events");
        else ctx.io.out(formatTable(eventColumns(ctx.now), events));
      });
    });

const showEventCommand = (deps: CommandDeps): Command =>
  new Command("show")
    .description("show one event in full, payload included")
    .argument("<event>", "the event id (evt-...)")
    .addOption(outputOption())
    .addHelpText("after", examples("flow events show evt-01jd8k2m3n4p5q6r7s8t9v0w1x", "flow events show \"$id\" -o json | jq .payload"))
    .action(async (id: string, opts: { output?: string }, cmd: Command) => {
      await withApi(deps, cmd, async (ctx) => {
        const event = await ctx.api.call<EventRecord & Record<string, unknown>>("GET", scopedPath(ctx, "events", id));
        const format = formatOf(opts);
        ctx.io.out(format === "table" ? formatEventDetails(event, ctx.now) : formatDocument(event, format));
      });
    });

export const eventsCommand = (deps: CommandDeps): Command =>
  new Command("events")
    .description("inspect the project's event bus")
    .addCommand(listEventsCommand(deps))
    .addCommand(showEventCommand(deps))
    .addHelpText("after", examples("flow events ls --type push", "flow events show evt-01jd8k2m3n4p5q6r7s8t9v0w1x"));
