// A handler (spec "Handler") as every writer sees it: the API's PUT body, a FlowHandler's spec, and
// the one function that turns either into what is stored. The ingest route, the Postgres adapter, the
// reconciler and the CRD generator all use these; nothing else defines a handler's rules.
import { z } from "zod";
import { compileCel } from "../cel.js";
import { FlowError } from "../errors.js";
import { validatePattern } from "../events.js";
import { secretNameProblem } from "../secret-rules.js";

export const HANDLER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Credential names share a name space with connected accounts; the spec shows no format, this is ours. */
export const CREDENTIAL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** The largest reaction source (and run source) accepted, in characters. */
export const SOURCE_LIMIT = 1024 * 1024;

export const HandlerName = z.string().regex(HANDLER_NAME, "a handler name is 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit");

/** A script file's base name (a handler's reaction, a submitted run). */
export const ScriptFilename = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[^/\\\0]+$/, "filename must be a base name, without slashes");

/** The body of `PUT .../handlers/{name}`, and a FlowHandler's spec (its name is metadata.name). */
export const HandlerSpec = z
  .object({
    on: z.array(z.string()).min(1, "give at least one type pattern (an exact type, prefix.* or *)").max(64),
    when: z.string().nullable().optional().describe("A CEL predicate over `event`; the handler runs only when it is true."),
    reaction: z
      .object({
        kind: z.literal("script", { error: 'only "script" is available in this version (yaml pipelines, graphs and nodes arrive later)' }),
        source: z.string().max(SOURCE_LIMIT, `the source is over ${SOURCE_LIMIT} bytes`),
        filename: ScriptFilename,
      })
      .strict()
      .describe("What runs: a script (run under bash -eu by an agent with the polyglot capability)."),
    tags: z.array(z.string().min(1).max(128)).max(32).default([]).describe("Tags given to every run the handler starts."),
    credentials: z
      .record(
        // The variable a credential is injected as follows the rule of a secret's name (checked after
        // parsing: zod reports a bad record key only as "Invalid key in record").
        z.string(),
        z.string().regex(CREDENTIAL_NAME, "a credential name is 1-128 of A-Z a-z 0-9 . _ -, starting with a letter or digit"),
      )
      .default({})
      .describe("ENV_VAR -> credential name, resolved when the job is claimed."),
  })
  .strict();
export type HandlerSpec = z.input<typeof HandlerSpec>;

export interface ScriptReaction {
  kind: "script";
  source: string;
  filename: string;
}

/** A handler as stored: validated, patterns trimmed and deduplicated, `when` compiled once. */
export interface HandlerInput {
  name: string;
  /** Type patterns: exact, `prefix.*` or `*`. */
  on: string[];
  /** A CEL predicate over `event` that compiled when the handler was set; null for none. */
  when: string | null;
  reaction: ScriptReaction;
  tags: string[];
  /** ENV_VAR -> credential name, resolved at claim. Names only, never values. */
  credentials: Record<string, string>;
}

export interface HandlerRecord extends HandlerInput {
  created_at: string;
  updated_at: string;
}

/** The compiler's message and position, named after the field: `when: ... at line 1, column 9`. */
export const compileWhen = (source: string): string => {
  try {
    compileCel(source, { variables: ["event"] });
  } catch (err) {
    if (err instanceof FlowError)
      throw new FlowError(err.code, `when: ${err.message}`, { details: { field: "when", ...err.details }, cause: err });
    throw err;
  }
  return source;
};

/**
 * A handler from an API body or a FlowHandler's spec, with every rule checked: a ZodError names the
 * field's path; a FlowError (invalid_argument) names the field in its message and `details.field`.
 * The name is checked too (HandlerName) though the route checked it already as a path parameter.
 */
export const parseHandler = (name: string, body: unknown): HandlerInput => {
  HandlerName.parse(name);
  const spec = HandlerSpec.parse(body);
  for (const variable of Object.keys(spec.credentials)) {
    const problem = secretNameProblem(variable, "credential variable");
    if (problem !== undefined)
      throw new FlowError("invalid_argument", `credentials: ${problem}`, { details: { field: `credentials.${variable}` } });
  }
  const on = [...new Set(spec.on.map((p) => validatePattern(p.trim())))];
  // An empty `when` is refused (compileCel says so), not read as "always": it is likely an unset variable.
  const when = spec.when === undefined || spec.when === null ? null : compileWhen(spec.when);
  return { name, on, when, reaction: spec.reaction, tags: spec.tags, credentials: spec.credentials };
};

/**
 * A FlowHandler's spec: the API body with `on` named `events`. kubectl reads YAML 1.1, where a bare
 * `on:` key is the boolean true (sigs.k8s.io/yaml turns it into the key "true"), so no field of a
 * custom resource may be called on/off/yes/no/y/n.
 */
export const HandlerResourceSpec = z
  .object({
    events: HandlerSpec.shape.on.describe("Event type patterns that start the handler: an exact type, prefix.* or *."),
    ...HandlerSpec.omit({ on: true }).shape,
  })
  .strict();
export type HandlerResourceSpec = z.input<typeof HandlerResourceSpec>;

/** A FlowHandler's spec checked by the API's rules (parseHandler): ZodErrors name `events`, not `on`. */
export const parseHandlerResource = (name: string, raw: unknown): HandlerInput => {
  const { events, ...rest } = HandlerResourceSpec.parse(raw);
  return parseHandler(name, { ...rest, on: events });
};

/** The FlowHandler spec that stands for a handler (what the Kubernetes ResourceStore writes). */
export const handlerResourceSpecOf = (h: HandlerInput): HandlerResourceSpec => ({
  events: h.on,
  when: h.when,
  reaction: h.reaction,
  tags: h.tags,
  credentials: h.credentials,
});
