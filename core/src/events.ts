import { FlowError } from "./errors.js";

/**
 * Rules of the event bus (spec: "Event (bus record)", "Events", "Limits"): which types may be
 * emitted, how handler patterns read and match, and the bus limits.
 */

/** An event type: 1-64 characters from `[A-Za-z0-9._-]`. */
export const EVENT_TYPE_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * What JSON Schema can say of the rules below, for the API's description (ingest/src/openapi): an
 * event type (validateEventType; a reserved type, assertEmittable's other refusal, is not said) and
 * a handler pattern as a handler's `on` takes it (validatePattern: `*`, a type, or a type and `.*`,
 * with the blanks around it that parseHandler trims). Zod-free: a route's schema carries it as `.meta()`.
 */
export const EVENT_TYPE_JSON_SCHEMA = { type: "string", pattern: EVENT_TYPE_PATTERN.source } as const;
export const EVENT_PATTERN_JSON_SCHEMA = {
  type: "string",
  pattern: `^\\s*(?:\\*|${EVENT_TYPE_PATTERN.source.slice(1, -1)}(?:\\.\\*)?)\\s*$`,
} as const;

/** An emit request body is at most 2 MiB; a larger one is a 413. */
export const EMIT_BODY_LIMIT = 2 * 1024 * 1024;
/** A custom emit from a handler run chains one generation deeper; past 5 the emit fails. */
export const CHAIN_DEPTH_LIMIT = 5;
/** More handler runs in flight in one project than this and an emit fails until they drain. */
export const HANDLER_RUNS_IN_FLIGHT_LIMIT = 16;

/** Types the platform emits, with the one-line description the event catalog shows. */
export const PLATFORM_EVENT_TYPES = {
  "run.started": "a run started (payload: run_id, status, workflow, tags, tag, trigger, run_url)",
  "run.succeeded": "a run succeeded; adds output",
  "run.failed": "a run failed; adds error (the last 4000 characters)",
  "run.cancelled": "a run was cancelled; adds reason (the last 4000 characters)",
  "run.awaiting": "a root run parked on an approval gate or an event wait in a graph or pipeline, once per wait",
  "run.wait_expired": "a bounded wait of a root run timed out",
  manual: "a run submitted by hand (flow submit or the API)",
  spawn: "a child run started by its parent (adds parent, the parent run id)",
  "schedule.tick": "a run started by a schedule (adds schedule, the schedule id)",
  push: "a run started by a push (forge hooks emit it as <hook>.push)",
} as const satisfies Record<string, string>;

export type PlatformEventType = keyof typeof PLATFORM_EVENT_TYPES;

const RESERVED_TYPES: ReadonlySet<string> = new Set(["push", "manual", "schedule.tick", "spawn"]);
const RESERVED_NAMESPACES = ["run.", "flow."] as const;

/** Refuses a type that is not 1-64 of `[A-Za-z0-9._-]`. */
export const validateEventType = (type: unknown, field = "type"): string => {
  if (typeof type !== "string" || !EVENT_TYPE_PATTERN.test(type)) {
    const shown = typeof type === "string" ? JSON.stringify(type.length > 80 ? `${type.slice(0, 80)}...` : type) : typeof type;
    throw new FlowError("invalid_argument", `${field}: event type ${shown} must be 1-64 characters from [A-Za-z0-9._-]`, {
      details: { field, rule: EVENT_TYPE_PATTERN.source },
    });
  }
  return type;
};

/**
 * Whether the platform alone emits this type: `push`, `manual`, `schedule.tick`, `spawn` and the
 * namespaces `run.*` and `flow.*`. Compared without case, so `Run.failed` cannot pass for one.
 */
export const isReservedType = (type: string): boolean => {
  const lower = type.toLowerCase();
  return RESERVED_TYPES.has(lower) || RESERVED_NAMESPACES.some((ns) => lower.startsWith(ns));
};

/** Refuses a malformed or reserved type on a user emit; returns the type. */
export const assertEmittable = (type: unknown): string => {
  const valid = validateEventType(type);
  if (isReservedType(valid)) {
    throw new FlowError(
      "invalid_argument",
      `type: event type "${valid}" is reserved for the platform (push, manual, schedule.tick, spawn, run.*, flow.*)`,
      {
        hint: "emit a type of your own, e.g. deploy.requested",
        details: { field: "type" },
      },
    );
  }
  return valid;
};

/** Refuses a handler pattern that is not an exact type, `prefix.*` or `*`; returns it. */
export const validatePattern = (pattern: unknown): string => {
  if (pattern === "*") return pattern;
  const prefix = typeof pattern === "string" && pattern.endsWith(".*") ? pattern.slice(0, -2) : pattern;
  if (typeof prefix !== "string" || !EVENT_TYPE_PATTERN.test(prefix)) {
    throw new FlowError(
      "invalid_argument",
      `on: pattern ${JSON.stringify(pattern)} must be an event type, a prefix wildcard like run.*, or *`,
      {
        details: { field: "on" },
      },
    );
  }
  return pattern as string;
};

/** Reads `--on a,b.*`: comma-separated patterns, blanks around them ignored, duplicates dropped. */
export const parsePatterns = (list: string): string[] => {
  const patterns = list.split(",").map((p) => p.trim());
  if (patterns.some((p) => p === "")) {
    throw new FlowError(
      "invalid_argument",
      `on: ${JSON.stringify(list)} has an empty pattern; write patterns separated by commas, e.g. deploy,run.*`,
      {
        details: { field: "on" },
      },
    );
  }
  return [...new Set(patterns.map(validatePattern))];
};

/** `*` matches every type, `prefix.*` every type under `prefix.` (at any depth), anything else itself. */
export const matchesPattern = (pattern: string, type: string): boolean => {
  if (pattern === "*") return true;
  if (pattern.endsWith(".*")) return type.startsWith(pattern.slice(0, -1));
  return pattern === type;
};

export const matchesAny = (patterns: readonly string[], type: string): boolean => patterns.some((p) => matchesPattern(p, type));
