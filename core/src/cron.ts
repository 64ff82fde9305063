/**
 * Cron expressions and time zones of schedules (`flow schedule set --cron --tz`): the one wrapper
 * over `croner` (exact version pinned; README "Dependencies and why"). Nothing else parses cron.
 * Pure: `now` comes in as a parameter.
 *
 * What is accepted: the five classic fields (minute hour day-of-month month day-of-week, with
 * lists, ranges, steps and names such as MON-FRI or JAN), or one of the nicknames @yearly,
 * @annually, @monthly, @weekly, @daily, @midnight, @hourly. Day of month and day of week combine as
 * in Vixie cron (either matches when both are restricted). Seconds and years are refused: a
 * schedule fires at most once a minute.
 *
 * Time zones (IANA names, as Intl knows them) and daylight saving time, as croner does them. A
 * fixed-time schedule (one value in the minute and in the hour field): a time that does not exist
 * on the day the clocks go forward (02:30 in America/New_York) fires at the first minute after the
 * gap (03:00); a time that happens twice when they go back (01:30) fires once, at its first
 * occurrence. Any other (a wildcard, step, range or list in minute or hour, `30 2,14 * * *` too)
 * follows the wall clock: a skipped time does not fire, a repeated one fires twice (README, Schedules).
 */
import { Cron } from "croner";
import { FlowError } from "./errors.js";

/** Cron text longer than this is refused before croner sees it. */
export const CRON_TEXT_LIMIT = 256;

const FIELDS = [
  { name: "minute", allowed: "0-59" },
  { name: "hour", allowed: "0-23" },
  { name: "day of month", allowed: "1-31, L" },
  { name: "month", allowed: "1-12 or JAN-DEC" },
  { name: "day of week", allowed: "0-7 (0 and 7 are Sunday) or SUN-SAT" },
] as const;

const NICKNAMES: ReadonlySet<string> = new Set(["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"]);

/** Legacy (Vixie) day-of-month OR day-of-week; schedules never run before `now`. */
const cronOf = (pattern: string, timezone: string): Cron =>
  new Cron(pattern === "@midnight" ? "@daily" : pattern, { timezone, paused: true, legacyMode: true });

const refuse = (message: string, details: Record<string, unknown>): never => {
  throw new FlowError("invalid_argument", `cron: ${message}`, {
    hint: "five fields: minute hour day-of-month month day-of-week, e.g. '0 2 * * *' (02:00 every day) or '*/15 * * * MON-FRI'",
    details: { field: "cron", ...details },
  });
};

/** croner's own words, without its prefix (`CronPattern: `). */
const reasonOf = (err: unknown): string => (err instanceof Error ? err.message : String(err)).replace(/^CronPattern:\s*/, "");

/**
 * Which field croner refuses: each field is tried alone, the others `*`. croner is the judge; this
 * only finds where, so the message can say which field (croner's own message numbers months from 0).
 */
const badField = (parts: readonly string[]): number | undefined => {
  for (let i = 0; i < parts.length; i++) {
    const alone = parts.map((p, j) => (j === i ? p : "*")).join(" ");
    try {
      cronOf(alone, "UTC");
    } catch {
      return i;
    }
  }
  return undefined;
};

const shown = (text: string): string => JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}...` : text);

/** The expression trimmed, with its whitespace runs made one space; refused with the field it breaks. */
export const parseCron = (text: string): string => {
  if (text.length > CRON_TEXT_LIMIT) refuse(`the expression is over ${CRON_TEXT_LIMIT} characters`, {});
  const normal = text.trim().split(/\s+/).join(" ");
  if (normal.startsWith("@")) {
    if (!NICKNAMES.has(normal.toLowerCase()))
      refuse(`${shown(normal)} is not a nickname cron knows; use one of ${[...NICKNAMES].join(", ")}`, {});
    return normal.toLowerCase();
  }
  const parts = normal === "" ? [] : normal.split(" ");
  if (parts.length !== FIELDS.length)
    refuse(`${shown(normal)} has ${parts.length} field${parts.length === 1 ? "" : "s"}; a schedule takes exactly 5 (no seconds or years)`, {
      fields: parts.length,
    });
  try {
    cronOf(normal, "UTC");
  } catch (err) {
    const at = badField(parts);
    const field = at === undefined ? undefined : FIELDS[at];
    if (at === undefined || field === undefined) return refuse(`${shown(normal)}: ${reasonOf(err)}`, {});
    refuse(`field ${at + 1} (${field.name}) ${shown(parts[at] ?? "")} is not valid: it takes ${field.allowed}, with , - / and *`, {
      position: at + 1,
      name: field.name,
    });
  }
  return normal;
};

/**
 * A time zone as Intl knows it (an IANA name such as Europe/Berlin, or UTC), in its canonical
 * spelling; refused with the field named.
 */
export const parseTimeZone = (zone: string): string => {
  const problem = (why: string): never => {
    throw new FlowError("invalid_argument", `tz: ${shown(zone)} ${why}`, {
      hint: "give an IANA time zone name such as UTC, Europe/Berlin or America/New_York",
      details: { field: "tz" },
    });
  };
  if (zone === "" || zone.length > 64 || !/^[A-Za-z0-9_+\-/]+$/.test(zone)) problem("is not a time zone name");
  try {
    return new Intl.DateTimeFormat("en-US", { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    return problem("is not a time zone this server knows");
  }
};

/**
 * The first time the expression matches strictly after `after`, in `zone`; null when it never
 * matches again (31 February). Expression and zone must have passed parseCron and parseTimeZone.
 */
export const nextFireAfter = (cron: string, zone: string, after: Date): Date | null => cronOf(cron, zone).nextRun(after) ?? null;

/** parseCron, parseTimeZone and a first fire time: a schedule that never fires is refused. */
export const checkSchedule = (cron: string, zone: string, now: Date): { cron: string; zone: string; next: Date } => {
  const c = parseCron(cron);
  const z = parseTimeZone(zone);
  const next = nextFireAfter(c, z, now);
  if (next === null) return refuse(`${shown(c)} never fires (no date matches it)`, {});
  return { cron: c, zone: z, next };
};
