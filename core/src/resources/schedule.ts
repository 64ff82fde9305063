// A schedule (issue 11: `flow schedule set <name> <file> --cron <expr> [--tz <zone>]`): the body of
// `PUT {scoped}/schedules/{name}` and the one function that turns it into what is stored. The cron
// and time-zone rules are core/src/cron.ts's; the script's are a handler's and a submit's.
import { z } from "zod";
import { checkSchedule } from "../cron.js";
import { credentialMapProblems } from "../credentials/resolve.js";
import { pickInterpreter } from "../interpreter.js";
import { HANDLER_NAME, ScriptFilename, SOURCE_LIMIT } from "./handler.js";

export const ScheduleName = z.string().regex(HANDLER_NAME, "a schedule name is 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit");

/** The body of `PUT .../schedules/{name}`. */
export const ScheduleSpec = z
  .object({
    cron: z.string().describe("Five cron fields (minute hour day-of-month month day-of-week) or a nickname such as @daily."),
    tz: z.string().default("UTC").describe("The IANA time zone the cron fields are read in."),
    reaction: z
      .object({
        kind: z.literal("script", { error: 'only "script" is available in this version (pipelines arrive later)' }),
        source: z.string().max(SOURCE_LIMIT, `the source is over ${SOURCE_LIMIT} bytes`),
        filename: ScriptFilename,
        interpreter: z.array(z.string().min(1).max(256)).min(1).max(16).optional(),
      })
      .strict()
      .describe("What each tick runs: a script, with the interpreter `flow submit` would pick unless given."),
    tags: z.array(z.string().min(1).max(128)).max(31).default([]).describe("Tags given to every run (schedule:<name> is added)."),
    credentials: z
      .record(z.string(), z.string())
      .default({})
      .superRefine((map, ctx) => {
        for (const message of credentialMapProblems(map, "")) ctx.addIssue({ code: "custom", message: message.replace(/^\./, "") });
      })
      .describe("ENV_VAR -> credential name, resolved when each run's job is claimed."),
  })
  .strict();
export type ScheduleSpec = z.input<typeof ScheduleSpec>;

export interface ScheduleScript {
  kind: "script";
  source: string;
  filename: string;
  /** Decided at set time: the one given, else by the file's extension (pickInterpreter). */
  interpreter: string[];
}

/** A schedule as stored, checked: the cron text normalised, the zone canonical, the first fire time. */
export interface ScheduleInput {
  name: string;
  cron: string;
  timeZone: string;
  reaction: ScheduleScript;
  tags: string[];
  credentials: Record<string, string>;
  /** The first time the cron matches after the set, in the zone. */
  nextFireAt: Date;
}

/** A schedule as the API answers it. */
export interface ScheduleRecord {
  id: string;
  name: string;
  cron: string;
  tz: string;
  paused: boolean;
  /** Null while paused. */
  next_fire_at: string | null;
  last_fired_at: string | null;
  last_run_id: string | null;
  reaction: ScheduleScript;
  tags: string[];
  credentials: Record<string, string>;
  created_by: string | null;
  created_at: string;
  updated_at: string;
}

/**
 * A schedule from an API body, every rule checked: a ZodError names the field's path; a FlowError
 * (invalid_argument) names `cron` (with the field of the expression) or `tz`. A cron that never
 * matches (31 February) is refused.
 */
export const parseSchedule = (name: string, body: unknown, now: Date): ScheduleInput => {
  ScheduleName.parse(name);
  const spec = ScheduleSpec.parse(body);
  const { cron, zone, next } = checkSchedule(spec.cron, spec.tz, now);
  const { interpreter, ...script } = spec.reaction;
  return {
    name,
    cron,
    timeZone: zone,
    reaction: { ...script, interpreter: interpreter ?? pickInterpreter(script.filename) },
    tags: spec.tags,
    credentials: spec.credentials,
    nextFireAt: next,
  };
};
