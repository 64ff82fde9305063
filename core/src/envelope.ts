import { triggerEnv } from "./script-env.js";

/**
 * What a reaction receives (spec: "Event (bus record)", "How each context reads the event"): the
 * envelope a handler run reads from `$FLOW_INPUT_FILE` and `flow wait-event` prints, its
 * `CI_TRIGGER_*` variables, and the `event` a handler's `--when` reads.
 */

/** Scalar fields a forge-shaped (or scheduled / spawned) event adds to its envelope. */
export interface EnvelopeFields {
  sha?: string;
  ref?: string;
  repo?: string;
  sender?: string;
  forge?: string;
  /** Files the push touched; `[]` with `paths_known: false` when the forge sent no file list. */
  paths?: string[];
  paths_known?: boolean;
  head_ref?: string;
  base_ref?: string;
  /** The schedule id, on `schedule.tick`. */
  schedule?: string;
  /** The parent run id, on `spawn`. */
  parent?: string;
}

export interface Envelope extends EnvelopeFields {
  type: string;
  /** The bus id (`...evt-...`). */
  event: string;
  /** The subject; absent for a broadcast event. */
  key?: string;
  payload: unknown;
}

export interface BusEvent {
  id: string;
  type: string;
  key?: string | null;
  payload: unknown;
  fields?: Readonly<Record<string, unknown>> | null;
}

const STRING_FIELDS = ["sha", "ref", "repo", "sender", "forge", "head_ref", "base_ref", "schedule", "parent"] as const;

/** The envelope's own fields taken from a bus row's `fields`: known names of the right type only. */
export const envelopeFields = (fields: Readonly<Record<string, unknown>> | null | undefined): EnvelopeFields => {
  const out: EnvelopeFields = {};
  if (!fields) return out;
  for (const name of STRING_FIELDS) {
    const value = fields[name];
    if (typeof value === "string") out[name] = value;
  }
  const paths = fields["paths"];
  if (Array.isArray(paths) && paths.every((p) => typeof p === "string")) out.paths = [...paths];
  if (typeof fields["paths_known"] === "boolean") out.paths_known = fields["paths_known"];
  return out;
};

/** `{type, event, key?, payload, ...fields}`: the whole event, never truncated. */
export const buildEnvelope = (event: BusEvent): Envelope => ({
  type: event.type,
  event: event.id,
  ...(typeof event.key === "string" ? { key: event.key } : {}),
  payload: event.payload === undefined ? null : event.payload,
  ...envelopeFields(event.fields),
});

/**
 * `CI_TRIGGER_EVENT` (the type), `CI_TRIGGER_EVENT_ID`, and `CI_TRIGGER_SHA`, `_SHORT_SHA`, `_REF`,
 * `_REPO`, `_SENDER`, `_FORGE`, `_SCHEDULE`, `_PARENT` when the envelope has them. Lists, objects,
 * `head_ref`/`base_ref` and the payload stay in the file.
 */
export const envelopeTriggerEnv = (envelope: Envelope): Record<string, string> =>
  triggerEnv(envelope as unknown as Readonly<Record<string, unknown>>);

/** The `event` a handler's `--when` reads, as the `vars` for `evaluatePredicate`. */
export interface CelEvent extends Omit<EnvelopeFields, "forge" | "schedule" | "parent"> {
  type: string;
  key?: string;
  payload: unknown;
}

/**
 * `{ event }` for a handler's `--when` (spec, Predicates): `type`, `key` (absent on a broadcast
 * event, so guard it with `has(event.key)`), `payload`, and for a push `ref`, `sha`, `repo`,
 * `sender`, `paths`, `paths_known`, for a pull request `sha`, `head_ref`, `base_ref`.
 */
export const celEventVars = (envelope: Envelope): { event: CelEvent } => {
  const { type, key, payload, sha, ref, repo, sender, paths, paths_known, head_ref, base_ref } = envelope;
  const picked = { sha, ref, repo, sender, paths, paths_known, head_ref, base_ref };
  const event: CelEvent = { type, ...(key === undefined ? {} : { key }), payload };
  for (const [name, value] of Object.entries(picked)) {
    if (value !== undefined) (event as unknown as Record<string, unknown>)[name] = value;
  }
  return { event };
};
