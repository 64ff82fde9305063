/**
 * `flow schedule set|ls|show|rm|pause|resume`: scripts the server runs on a cron, in a time zone
 * (issue 11). Each tick records a `schedule.tick` event and runs the script with
 * CI_TRIGGER_EVENT=schedule.tick and CI_TRIGGER_SCHEDULE=<schedule id>. The cron text is checked by
 * the server (core/src/cron.ts); this client loads no cron parser and no zod.
 */
import { basename } from "node:path";
import { FlowError } from "@flowsvc/core/errors";
import { formatAge, formatDetails, formatDocument, formatTime } from "../print-format.js";
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import { readSource } from "../read-source.js";
import { listFrom } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import type { CommandContext } from "./context.js";
import { OUTPUT_OPTION, collectList, formatOf, splitInterpreter } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

export interface ScheduleView {
  id: string;
  name: string;
  cron: string;
  tz: string;
  paused: boolean;
  next_fire_at: string | null;
  last_fired_at: string | null;
  last_run_id: string | null;
  reaction: { kind: string; filename: string; interpreter: string[]; size: number; source?: string };
  tags: string[];
  credentials: Record<string, string>;
  created_by: string | null;
  created_at: string;
  updated_at: string;
}

interface SetOptions {
  cron?: string;
  tz?: string;
  interpreter?: string;
  credential?: string[];
  tag?: string[];
  output?: string;
}

/** `--credential ENV=name` flags as core's rules read them, imported only when a flag is given (as `flow submit`). */
const parseCredentialFlags = async (flags: readonly string[] | undefined): Promise<Record<string, string>> => {
  if (flags === undefined || flags.length === 0) return {};
  const { parseCredentialFlag } = await import("@flowsvc/core/credentials");
  return Object.fromEntries(flags.map((text) => parseCredentialFlag(text)));
};

/** Where the next tick is, for people: `2026-06-02 02:00 (in 5h)`, or why there is none. */
const nextOf = (s: ScheduleView, now: Date): string => {
  if (s.paused) return "paused";
  if (s.next_fire_at === null) return "never";
  return formatTime(s.next_fire_at, now);
};

const printOne = (ctx: CommandContext, s: ScheduleView, opts: { output?: string }, note: string): void => {
  const format = formatOf(opts);
  if (format !== "table") ctx.io.out(formatDocument(s, format));
  else ctx.io.note(note);
};

const setSpec: CommandSpec = {
  name: "set",
  description: "create or replace a schedule: run a script on a cron, in a time zone (member)",
  arguments: [
    { name: "<name>", description: "the schedule's name: 1-64 of A-Z a-z 0-9 . _ -" },
    {
      name: "<file>",
      description: "the script; by extension it runs with python3 (.py), bun run (.ts), node (.js, .mjs), go run (.go), else bash -eu",
    },
  ],
  options: [
    {
      flags: "--cron <expr>",
      description: "five fields: minute hour day-of-month month day-of-week (e.g. '0 2 * * *'), or @hourly, @daily, @weekly ...",
    },
    { flags: "--tz <zone>", description: "the IANA time zone the cron is read in (default UTC), e.g. Europe/Berlin" },
    { flags: "--interpreter <cmd>", description: "the command that runs the file, split on spaces (overrides the extension)" },
    {
      flags: "--credential <ENV=name>",
      description: "give each run the credential <name> as variable ENV, resolved when its job starts (repeatable)",
      parse: collectList,
    },
    { flags: "--tag <tag>", description: "tag every run (repeatable; schedule:<name> is always added)", parse: collectList },
    OUTPUT_OPTION,
  ],
  examples: [
    "flow schedule set nightly examples/schedules/nightly.sh --cron '0 2 * * *' --tz Europe/Berlin",
    "flow schedule set report report.py --cron '*/15 9-17 * * MON-FRI' --credential SLACK_TOKEN=slack",
    "flow schedule set weekly weekly.js --cron @weekly --interpreter 'node --enable-source-maps'",
  ],
  action: async (deps, { args: [name = "", file = ""], opts: options, flags }) => {
    const opts = options as SetOptions;
    if (opts.cron === undefined)
      throw new FlowError("invalid_argument", "--cron is required: when the script runs", {
        hint: "e.g. --cron '0 2 * * *' (02:00 every day) or --cron @hourly",
      });
    const credentials = await parseCredentialFlags(opts.credential); // a bad flag is refused before the file is read
    const body = {
      cron: opts.cron,
      ...(opts.tz === undefined ? {} : { tz: opts.tz }),
      reaction: {
        kind: "script",
        source: await readSource(file),
        filename: basename(file),
        ...(opts.interpreter === undefined ? {} : { interpreter: splitInterpreter(opts.interpreter) }),
      },
      tags: opts.tag ?? [],
      credentials,
    };
    await withSettings(deps, flags, async (ctx) => {
      const s = await ctx.api.call<ScheduleView>("PUT", scopedPath(ctx, "schedules", name), body);
      const verb = s.created_at === s.updated_at ? "created" : "replaced";
      printOne(ctx, s, opts, `schedule ${s.name} ${verb}: ${s.cron} (${s.tz}), next run ${nextOf(s, ctx.now)}`);
    });
  },
};

const SCHEDULE_COLUMNS = (now: Date): Array<Column<ScheduleView>> => [
  { header: "NAME", value: (s) => s.name },
  { header: "CRON", value: (s) => s.cron },
  { header: "ZONE", value: (s) => s.tz },
  { header: "NEXT", value: (s) => nextOf(s, now) },
  { header: "PAUSED", value: (s) => (s.paused ? "yes" : "no") },
  { header: "LAST", value: (s) => (s.last_fired_at ? formatAge(s.last_fired_at, now) : "-") },
  { header: "SCRIPT", value: (s) => s.reaction.filename },
];

const listSpec: CommandSpec = {
  name: "ls",
  aliases: ["list"],
  description: "list the project's schedules: name, cron, zone, next run, paused (viewer)",
  options: [OUTPUT_OPTION],
  examples: ["flow schedule ls", "flow schedule ls -o json | jq -r '.[] | [.name, .next_fire_at] | @tsv'"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const schedules = listFrom<ScheduleView>(await ctx.api.call("GET", scopedPath(ctx, "schedules")), ["schedules"]);
      printList(ctx.io, formatOf(opts), schedules, { columns: SCHEDULE_COLUMNS(ctx.now), empty: "no schedules" });
    });
  },
};

/** One schedule for people: its fields, then the script. */
export const formatScheduleDetails = (s: ScheduleView, now: Date): string => {
  const credentials = Object.entries(s.credentials).map(([env, cred]) => `${env}=${cred}`);
  return (
    formatDetails([
      ["name", s.name],
      ["id", s.id],
      ["cron", `${s.cron} (${s.tz})`],
      ["next", nextOf(s, now)],
      ["last", s.last_fired_at ? `${formatTime(s.last_fired_at, now)} (${s.last_run_id ?? "-"})` : "-"],
      ["script", `${s.reaction.filename} (${s.reaction.size} bytes, runs with ${s.reaction.interpreter.join(" ")})`],
      ["tags", s.tags.length ? s.tags.join(",") : "-"],
      ["credentials", credentials.length ? credentials.join(" ") : "-"],
      ["created", `${formatTime(s.created_at, now)}${s.created_by ? ` by ${s.created_by}` : ""}`],
      ["updated", formatTime(s.updated_at, now)],
    ]) + (s.reaction.source === undefined ? "" : `\n${s.reaction.source}`)
  );
};

const showSpec: CommandSpec = {
  name: "show",
  description: "show one schedule, its script included (viewer)",
  arguments: [{ name: "<name>", description: "the schedule's name" }],
  options: [OUTPUT_OPTION],
  examples: ["flow schedule show nightly", "flow schedule show nightly -o json | jq -r .next_fire_at"],
  action: async (deps, { args: [name = ""], opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const s = await ctx.api.call<ScheduleView>("GET", scopedPath(ctx, "schedules", name));
      const format = formatOf(opts);
      ctx.io.out(format === "table" ? formatScheduleDetails(s, ctx.now) : formatDocument(s, format));
    });
  },
};

const rmSpec: CommandSpec = {
  name: "rm",
  description: "remove a schedule; runs it already started go on (member)",
  arguments: [{ name: "<name>", description: "the schedule's name" }],
  examples: ["flow schedule rm nightly"],
  action: async (deps, { args: [name = ""], flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      await ctx.api.call("DELETE", scopedPath(ctx, "schedules", name));
      ctx.io.note(`schedule ${name} removed`);
    });
  },
};

const pauseSpec = (action: "pause" | "resume"): CommandSpec => ({
  name: action,
  description:
    action === "pause"
      ? "pause a schedule: no tick fires until it is resumed (member)"
      : "resume a paused schedule: it waits for its next match; ticks missed while paused are not made up (member)",
  arguments: [{ name: "<name>", description: "the schedule's name" }],
  options: [OUTPUT_OPTION],
  examples: [`flow schedule ${action} nightly`],
  action: async (deps, { args: [name = ""], opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const s = await ctx.api.call<ScheduleView>("POST", `${scopedPath(ctx, "schedules", name)}/${action}`, {});
      printOne(ctx, s, opts, `schedule ${s.name} ${s.paused ? "paused" : `resumed: next run ${nextOf(s, ctx.now)}`}`);
    });
  },
});

export const scheduleSpec: CommandSpec = {
  name: "schedule",
  description: "manage the project's schedules: scripts the server runs on a cron",
  subcommands: [setSpec, listSpec, showSpec, rmSpec, pauseSpec("pause"), pauseSpec("resume")],
  examples: ["flow schedule set nightly nightly.sh --cron '0 2 * * *' --tz Europe/Berlin", "flow schedule ls"],
};
