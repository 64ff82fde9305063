// A handler (spec "Handler") as every writer sees it: the API's PUT body, a FlowHandler's spec, and
// the one function that turns either into what is stored. The ingest route, the Postgres adapter, the
// reconciler and the CRD generator all use these; nothing else defines a handler's rules.
import { z } from "zod";
import { compileCel } from "../cel.js";
import { FlowError } from "../errors.js";
import { EVENT_PATTERN_JSON_SCHEMA, validatePattern } from "../events.js";
import { secretNameProblem } from "../secret-rules.js";
import { GRAPH_VERSION, type GraphDocument } from "../graph/model.js";
import { parseGraph } from "../graph/parse.js";
import { compilePipeline, pipelineError } from "../pipeline/compile.js";

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

const SourceText = z.string().max(SOURCE_LIMIT, `the source is over ${SOURCE_LIMIT} bytes`);

/**
 * A handler's reaction (spec "Handler", "How each context reads the event"). A script reads the
 * envelope from FLOW_INPUT_FILE; a pipeline, a stored graph and a single node run as a graph run whose
 * input is the event's envelope (`input.type`, `input.payload.<field>`), its subject the event's key.
 */
export const Reaction = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("script"), source: SourceText, filename: ScriptFilename }).strict(),
  z.object({ kind: z.literal("pipeline"), source: SourceText, filename: ScriptFilename }).strict(),
  z.object({ kind: z.literal("graph"), graph: z.string().regex(HANDLER_NAME, "a graph name is 1-64 of A-Z a-z 0-9 . _ -") }).strict(),
  z
    .object({
      kind: z.literal("node"),
      type: z.string().min(1).max(128),
      config: z.record(z.string(), z.unknown()).default({}),
    })
    .strict(),
]);
export type Reaction = z.output<typeof Reaction>;

/** A handler's type patterns: 1 to 64. */
const onPatterns = (pattern: z.ZodType<string>) =>
  z.array(pattern).min(1, "give at least one type pattern (an exact type, prefix.* or *)").max(64);

/** The body of `PUT .../handlers/{name}`, and a FlowHandler's spec (its name is metadata.name). */
export const HandlerSpec = z
  .object({
    // Each pattern's rule is validatePattern's (parseHandler); the API's description says it too (meta).
    on: onPatterns(z.string().meta({ ...EVENT_PATTERN_JSON_SCHEMA })),
    when: z.string().nullable().optional().describe("A CEL predicate over `event`; the handler runs only when it is true."),
    reaction: Reaction.describe(
      "What runs: a script (bash -eu, by an agent with the polyglot capability), a pipeline (a snapshot of its YAML), a stored graph (by name, read when the event arrives) or one node.",
    ),
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

/** The one node of a `--node <kind> --config <json>` reaction. */
export const REACTION_NODE_ID = "reaction";

/** The single-node graph document a `node` reaction runs. */
export const reactionNodeGraph = (r: { type: string; config: Record<string, unknown> }): GraphDocument => ({
  version: GRAPH_VERSION,
  nodes: [{ id: REACTION_NODE_ID, type: r.type, config: r.config }],
  edges: [],
});

/** What `ls` and `show` name a reaction by, and its text: a script's or pipeline's file, `graph:<name>`, or `node:<kind>` with its config as JSON. */
export const reactionView = (r: Reaction): { filename: string; source: string } => {
  if (r.kind === "script" || r.kind === "pipeline") return { filename: r.filename, source: r.source };
  if (r.kind === "graph") return { filename: `graph:${r.graph}`, source: "" };
  return { filename: `node:${r.type}`, source: JSON.stringify(r.config) };
};

/** A reaction checked beyond its shape: a pipeline compiles (problems with line and column), a node is a valid graph node. */
const checkReaction = (r: Reaction): void => {
  if (r.kind === "pipeline") {
    const compiled = compilePipeline(r.source);
    if (!compiled.ok) {
      const e = pipelineError(compiled.problems);
      throw new FlowError("invalid_argument", `reaction.source: ${e.message}`, { details: { field: "reaction.source", ...e.details } });
    }
  }
  if (r.kind === "node") {
    const parsed = parseGraph(reactionNodeGraph(r));
    if (!parsed.ok)
      throw new FlowError(
        "invalid_argument",
        parsed.problems.map((p) => `reaction.${p.path.replace(/^nodes\[0\]\./, "")}: ${p.message}`).join("; "),
        { details: { field: "reaction" } },
      );
  }
};

/** A handler as stored: validated, patterns trimmed and deduplicated, `when` compiled once. */
export interface HandlerInput {
  name: string;
  /** Type patterns: exact, `prefix.*` or `*`. */
  on: string[];
  /** A CEL predicate over `event` that compiled when the handler was set; null for none. */
  when: string | null;
  reaction: Reaction;
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
    compileCel(source, { variables: ["event"], predicate: true });
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
  checkReaction(spec.reaction);
  if (spec.reaction.kind !== "script" && Object.keys(spec.credentials).length > 0)
    throw new FlowError(
      "invalid_argument",
      `credentials: only a script reaction takes a credential map; a ${spec.reaction.kind} names its credentials in its own nodes or credentials: maps`,
      { details: { field: "credentials" } },
    );
  return { name, on, when, reaction: spec.reaction, tags: spec.tags, credentials: spec.credentials };
};

/**
 * A FlowHandler's spec: the API body with `on` named `events`. kubectl reads YAML 1.1, where a bare
 * `on:` key is the boolean true (sigs.k8s.io/yaml turns it into the key "true"), so no field of a
 * custom resource may be called on/off/yes/no/y/n.
 */
export const HandlerResourceSpec = z
  .object({
    // Without the patterns' JSON Schema (the API's description only): the CRD (crds/) leaves them to the reconciler's parseHandler.
    events: onPatterns(z.string()).describe("Event type patterns that start the handler: an exact type, prefix.* or *."),
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
