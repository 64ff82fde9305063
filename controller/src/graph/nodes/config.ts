/** Reading an executor's evaluated config: each field checked where it is read, problems naming `config.<field>`. */
import { FlowError, parseDuration } from "@flowsvc/core";

export type Config = Record<string, unknown>;

const bad = (field: string, what: string): FlowError =>
  new FlowError("invalid_argument", `config.${field}: ${what}`, { details: { field: `config.${field}` } });

export const asConfig = (value: unknown): Config => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw bad("", "must be an object");
  return value as Config;
};

export const str = (c: Config, field: string): string | undefined => {
  const v = c[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw bad(field, `must be a string, not ${Array.isArray(v) ? "an array" : typeof v}`);
  return v;
};

export const requiredStr = (c: Config, field: string): string => {
  const v = str(c, field);
  if (v === undefined || v === "") throw bad(field, "required");
  return v;
};

export const stringMap = (c: Config, field: string): Record<string, string> => {
  const v = c[field];
  if (v === undefined || v === null) return {};
  if (typeof v !== "object" || Array.isArray(v)) throw bad(field, "must be an object of strings");
  const out = new Map<string, string>();
  for (const [k, x] of Object.entries(v)) {
    if (typeof x !== "string") throw bad(`${field}.${k}`, "must be a string");
    out.set(k, x);
  }
  return Object.fromEntries(out);
};

export const stringList = (c: Config, field: string): string[] | undefined => {
  const v = c[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v === "string") return v.split(/\s+/).filter((w) => w !== "");
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) throw bad(field, "must be a string or an array of strings");
  return v as string[];
};

/** A duration field (`"30s"`) in ms, within [0, max]. */
export const durationMs = (c: Config, field: string, fallback: number, max: number): number => {
  const v = str(c, field);
  if (v === undefined) return fallback;
  let ms: number;
  try {
    ms = parseDuration(v);
  } catch (err) {
    throw bad(field, err instanceof Error ? err.message : String(err));
  }
  if (ms > max) throw bad(field, `at most ${max / 1000}s`);
  return ms;
};
