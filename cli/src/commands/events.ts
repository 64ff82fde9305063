/** `flow events ls|show|catalog`: the project's event bus, newest first, one full event, and the types it knows. */
import { parseDuration } from "@flowsvc/core/duration";
import { formatAge, formatDetails, formatDocument, formatJsonCell, formatTable, formatTime } from "../print-format.js";
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import { withQuery } from "../http.js";
import { listFrom } from "./api-types.js";
import type { EventRecord } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import { InvalidArgumentError, OUTPUT_OPTION, formatOf, parsePositiveInt } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

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

/** `--since 30m` or `--since 2025-01-31T12:00:00Z`: checked here, resolved by the server (it sends the times). */
export const parseSinceFlag = (text: string): string => {
  if (/^\d{4}-\d{2}-\d{2}/.test(text)) {
    if (Number.isNaN(Date.parse(text))) throw new InvalidArgumentError(`"${text}" is not a valid ISO 8601 time.`);
    return text;
  }
  try {
    parseDuration(text);
  } catch {
    throw new InvalidArgumentError("expected a duration back from now (30m, 2h, 7d) or an ISO 8601 time (2025-01-31T12:00:00Z).");
  }
  return text;
};

interface ListOptions {
  type?: string;
  key?: string;
  since?: string;
  limit?: number;
  output?: string;
}

const listEventsSpec: CommandSpec = {
  name: "ls",
  aliases: ["list"],
  description: "list recent events, newest first",
  options: [
    { flags: "--type <type>", description: "only events of this type" },
    { flags: "--key <subject>", description: "only events with this subject (key)" },
    {
      flags: "--since <duration|time>",
      description: "only events recorded since then: a duration back from now (30m, 2h) or an ISO 8601 time",
      parse: parseSinceFlag,
    },
    { flags: "--limit <n>", description: "at most this many events (default 50)", parse: parsePositiveInt },
    OUTPUT_OPTION,
  ],
  examples: ["flow events ls", "flow events ls --type deploy.finished --limit 5 -o json", "flow events ls --key acme/web --since 2h"],
  action: async (deps, { opts, flags }) => {
    const { type, key, since, limit } = opts as ListOptions;
    await withSettings(deps, flags, async (ctx) => {
      const path = withQuery(scopedPath(ctx, "events"), { type, key, since, limit });
      const events = listFrom<EventRecord>(await ctx.api.call("GET", path), ["events"]);
      printList(ctx.io, formatOf(opts), events, { columns: eventColumns(ctx.now), empty: "no events" });
    });
  },
};

const showEventSpec: CommandSpec = {
  name: "show",
  description: "show one event in full, payload included",
  arguments: [{ name: "<event>", description: "the event id (evt-...)" }],
  options: [OUTPUT_OPTION],
  examples: ["flow events show evt-01jd8k2m3n4p5q6r7s8t9v0w1x", 'flow events show "$id" -o json | jq .payload'],
  action: async (deps, { args: [id = ""], opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const event = await ctx.api.call<EventRecord & Record<string, unknown>>("GET", scopedPath(ctx, "events", id));
      const format = formatOf(opts);
      ctx.io.out(format === "table" ? formatEventDetails(event, ctx.now) : formatDocument(event, format));
    });
  },
};

interface CatalogEntry {
  type: string;
  description?: string;
  graph?: string;
  event_id?: string;
  key?: string | null;
  last_seen_at?: string;
  sample_payload?: unknown;
  payload_bytes?: number;
  sample_omitted?: boolean;
}

interface Catalog {
  platform: CatalogEntry[];
  declared: CatalogEntry[];
  seen: CatalogEntry[];
  seen_truncated?: boolean;
}

/** Three sections for people: platform types, types graphs declare, types seen with a sample payload. */
export const formatCatalog = (catalog: Catalog, now: Date): string => {
  const platform = formatTable(
    [
      { header: "PLATFORM TYPE", value: (e: CatalogEntry) => e.type },
      { header: "DESCRIPTION", value: (e) => e.description ?? "" },
    ],
    catalog.platform,
  );
  const declared =
    catalog.declared.length === 0
      ? "DECLARED BY GRAPHS\n(none: no stored graph declares an event type)\n"
      : formatTable(
          [
            { header: "DECLARED TYPE", value: (e: CatalogEntry) => e.type },
            { header: "GRAPH", value: (e) => e.graph ?? "-" },
          ],
          catalog.declared,
        );
  const sample = (e: CatalogEntry): string =>
    e.sample_omitted ? `(${e.payload_bytes ?? "?"} bytes: flow events show ${e.event_id ?? ""})` : formatJsonCell(e.sample_payload);
  const seen =
    catalog.seen.length === 0
      ? "SEEN ON THE BUS\n(none yet)\n"
      : formatTable(
          [
            { header: "SEEN TYPE", value: (e: CatalogEntry) => e.type },
            { header: "LAST", value: (e) => formatAge(e.last_seen_at, now) },
            { header: "KEY", value: (e) => e.key ?? "-" },
            { header: "SAMPLE PAYLOAD", value: sample },
          ],
          catalog.seen,
        );
  const more = catalog.seen_truncated ? "(more types were seen than the catalog lists)\n" : "";
  return `${platform}\n${declared}\n${seen}${more}`;
};

const catalogSpec: CommandSpec = {
  name: "catalog",
  description:
    "list the event types this project knows: platform types, types graphs declare, and types seen on the bus with a sample payload",
  options: [OUTPUT_OPTION],
  examples: ["flow events catalog", "flow events catalog -o json | jq '.seen[] | {type, sample_payload}'"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const catalog = await ctx.api.call<Catalog>("GET", scopedPath(ctx, "events", "catalog"));
      const format = formatOf(opts);
      ctx.io.out(format === "table" ? formatCatalog(catalog, ctx.now) : formatDocument(catalog, format));
    });
  },
};

export const eventsSpec: CommandSpec = {
  name: "events",
  description: "inspect the project's event bus",
  subcommands: [listEventsSpec, showEventSpec, catalogSpec],
  examples: ["flow events ls --type deploy.requested", "flow events show evt-01jd8k2m3n4p5q6r7s8t9v0w1x", "flow events catalog"],
};
