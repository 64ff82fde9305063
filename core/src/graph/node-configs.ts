/**
 * Each node type's config (spec, "Graph document shape"; issue 10, "Node types"; README "Graphs",
 * "Node types"). A check returns problems with paths relative to the node's `config` (`.url`,
 * `.fields[1].options`); a problem with the path "" is about the node's `type`.
 *
 * Configs are strict: a key the type does not take is refused (a typo such as `urll` would
 * otherwise be dropped silently). Where a value may be computed, `{"$expr"}`/`{"$template"}` is
 * accepted in place of a string and its result is checked when the node runs. The CEL of `when`
 * texts is compiled here; `$expr`/`$template`/`if` anywhere are compiled by parse.ts.
 */
import { z } from "zod";
import { credentialNameProblem } from "../credentials/kinds.js";
import { MAX_DECLARED_CREDENTIALS, credentialMapProblems } from "../credentials/resolve.js";
import { DurationText, durationProblem } from "../duration-schema.js";
import { parseDuration } from "../duration.js";
import { FlowError } from "../errors.js";
import { assertEmittable, validateEventType } from "../events.js";
import { envMapProblems } from "../secret-rules.js";
import { parseApprovalFields } from "./approval-fields.js";
import { CONNECTOR_TYPE, NODE_TYPES } from "./model.js";
import { EVENT_WHEN_VARIABLES, GRAPH_VARIABLES, asConfigExpression, expressionProblem } from "./expressions.js";

/** A connector's manifest as far as the graph check needs it (D's ConnectorManifest fits). */
export interface ManifestInfo {
  readonly type: string;
  readonly credential: { readonly kinds: readonly string[]; readonly required: boolean };
}

export interface NodeConfigContext {
  /** The manifest of a connector type (core/src/graph/connectors.ts's `connectorManifest`); absent: dotted types pass unchecked. */
  readonly manifestOf?: ((type: string) => ManifestInfo | undefined) | undefined;
  /**
   * Every problem of a connector node's config, each `config.<path>: <message>` (connectors.ts's
   * `connectorConfigProblems(manifest, config)`); given, it replaces the credential check below.
   */
  readonly connectorProblems?: ((type: string, config: Record<string, unknown>) => readonly string[]) | undefined;
}

export interface ConfigProblem {
  /** Relative to the node's config (`.url`, `.fields[1].options`, "" for the config itself). */
  path: string;
  message: string;
  /** The problem is the node's `type`, not its config. */
  onType?: boolean;
}

/** The HTTP methods an http node may use. */
export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
/** A case name: an identifier, so it reads well in CEL (`nodes.s.output.branch == "deploy"`). */
const NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
const NAME_RULE = "must be 1-64 characters from [A-Za-z0-9_-], starting with a letter or _";
/** RFC 9110 token: an HTTP header name. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

/** `[1].options` as zod path segments ([1, "options"]), so a problem found outside zod keeps its place. */
const pathSegments = (path: string): PropertyKey[] =>
  [...path.matchAll(/\[(\d+)\]|\.?([^.[\]]+)/g)].map((m) => (m[1] !== undefined ? Number(m[1]) : m[2]!));

const isExpr = (v: unknown): boolean => asConfigExpression(v) !== undefined;
const EXPR_NOTE = 'or {"$expr": ...} / {"$template": ...}';

/** A string, or an expression object whose result is checked when the node runs. */
const strOrExpr = (rule?: (s: string) => string | undefined) =>
  z.unknown().superRefine((v, ctx) => {
    if (isExpr(v)) return;
    if (typeof v !== "string") {
      ctx.addIssue({ code: "custom", message: v === undefined ? "required" : `must be a string ${EXPR_NOTE}` });
      return;
    }
    const problem = rule?.(v);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
  });

const duration = DurationText;

/** Longest `timeout` of an http node (the engine's limit, controller/src/graph/nodes/http.ts): 10 minutes. */
export const HTTP_TIMEOUT_MAX_MS = 600_000;
/** Longest `timeout` of a code or shell node (the engine's limit, controller/src/graph/nodes/code.ts): a day. */
export const NODE_JOB_TIMEOUT_MAX_MS = 24 * 3600 * 1000;

/** A duration of at most `maxMs`, refused when checked (`at most 10m (600s)`), not when the node runs. */
const durationAtMost = (maxMs: number, shown: string) =>
  z.string().superRefine((v, ctx) => {
    const p = durationProblem(v);
    if (p !== undefined) ctx.addIssue({ code: "custom", message: p });
    else if (parseDuration(v) > maxMs) ctx.addIssue({ code: "custom", message: `at most ${shown} (${maxMs / 1000}s)` });
  });

const flowErrorProblem = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (error) {
    if (error instanceof FlowError) return error.message.replace(/^(type|event_type|event): /, "");
    throw error;
  }
};

/** A `when` (a switch case's, an event node's): a CEL predicate, refused when it cannot be a bool. */
const cel = (variables: readonly string[]) =>
  z.string().superRefine((v, ctx) => {
    const p = expressionProblem(v, variables, true);
    if (p !== undefined) ctx.addIssue({ code: "custom", message: p });
  });

const credentialName = strOrExpr(credentialNameProblem);
const eventType = z.string().superRefine((v, ctx) => {
  const p = flowErrorProblem(() => validateEventType(v));
  if (p !== undefined) ctx.addIssue({ code: "custom", message: p });
});
/** `ENV_VAR -> credential name`, by core's rule for declared credentials (`LD_PRELOAD`, `FLOW_*` refused). */
const credentialMap = z.record(z.string(), z.string()).superRefine((map, ctx) => {
  const entries = Object.entries(map);
  if (entries.length > MAX_DECLARED_CREDENTIALS) {
    ctx.addIssue({ code: "custom", message: `at most ${MAX_DECLARED_CREDENTIALS} credential variables; ${entries.length} were given` });
    return;
  }
  // One entry at a time, so each problem goes to its variable's path (a name may hold ":").
  for (const [variable, name] of entries) {
    const prefix = `.${variable.length > 64 ? `${variable.slice(0, 64)}...` : variable}: `;
    for (const p of credentialMapProblems({ [variable]: name }, ""))
      ctx.addIssue({ code: "custom", message: p.startsWith(prefix) ? p.slice(prefix.length) : p, path: [variable] });
  }
});
const stringMap = z.record(z.string(), strOrExpr());
/** A code/shell node's `env`: each name by core's one rule for a run's environment (`FLOW_*`, `LD_PRELOAD`, `PATH`... refused). */
const envMap = stringMap.superRefine((env, ctx) => {
  for (const { segment, message } of envMapProblems(env)) ctx.addIssue({ code: "custom", path: [segment], message });
});

const http = z
  .object({
    url: strOrExpr((u) => (/^https?:\/\//i.test(u) ? undefined : "must be an http:// or https:// URL")),
    method: z
      .union([z.enum(HTTP_METHODS), z.custom(isExpr)], { error: `must be one of ${HTTP_METHODS.join(", ")} ${EXPR_NOTE}` })
      .optional(),
    headers: z
      .record(
        z.string().regex(HEADER_NAME, { error: "is not an HTTP header name" }),
        strOrExpr((v) => (/[\r\n\0]/.test(v) ? "a header value cannot hold a line break or NUL" : undefined)),
      )
      .optional(),
    body: z.unknown().optional(),
    credential: credentialName.optional(),
    timeout: durationAtMost(HTTP_TIMEOUT_MAX_MS, "10m").optional(),
  })
  .strict();

const job = {
  interpreter: z.string().min(1).max(256).optional(),
  credentials: credentialMap.optional(),
  env: envMap.optional(),
  requires: z.string().min(1).max(128).optional(),
  timeout: durationAtMost(NODE_JOB_TIMEOUT_MAX_MS, "1d").optional(),
};
/**
 * `file` is refused here, at its path: a graph is one document (submitted, stored, or read by a
 * FlowGraph), with no files beside it to read, so a path could only fail when the node ran.
 */
const code = z
  .object({ source: strOrExpr(), file: z.unknown().optional(), ...job })
  .strict()
  .superRefine((c, ctx) => {
    if (c.file !== undefined)
      ctx.addIssue({
        code: "custom",
        message: "a code node runs its source: put the script's text in source (a graph has no files beside it)",
        path: ["file"],
      });
  });
const shell = z.object({ command: strOrExpr(), ...job }).strict();

const switchNode = z
  .object({
    cases: z
      .array(z.object({ name: z.string().regex(NAME, { error: NAME_RULE }), when: cel(GRAPH_VARIABLES) }).strict())
      .min(1, { error: "a switch needs at least one case" }),
    default: z.string().optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    const names = new Set<string>();
    c.cases.forEach((k, i) => {
      if (names.has(k.name)) ctx.addIssue({ code: "custom", message: `duplicate case name "${k.name}"`, path: ["cases", i, "name"] });
      names.add(k.name);
    });
    if (c.default !== undefined && !names.has(c.default))
      ctx.addIssue({ code: "custom", message: `"${c.default}" names no case (cases: ${[...names].join(", ")})`, path: ["default"] });
  });

/**
 * An approval's `fields`: the one rule is approval-fields.ts's `parseApprovalFields` (the approvals
 * route, the executor and `flow approve` read fields through it too), so the graph check and the
 * gate never disagree on what a field may be. Each problem keeps its place (`.fields[1].options`).
 */
const approvalFields = z.unknown().superRefine((v, ctx) => {
  const r = parseApprovalFields(v, "");
  if (r.ok) return;
  for (const p of r.problems) ctx.addIssue({ code: "custom", message: p.message, path: pathSegments(p.path) });
});
const approval = z.object({ prompt: strOrExpr(), fields: approvalFields.optional(), timeout: duration.optional() }).strict();

const event = z.object({ event: eventType, when: cel(EVENT_WHEN_VARIABLES).optional(), timeout: duration.optional() }).strict();

/**
 * A repository's full name for `from_repo`: `owner/name`, neither of them `.` or `..` (GitHub allows
 * neither; the URL parser would resolve such a segment and take the read out of `/repos/`).
 */
export const REPO_FULL_NAME = /^(?!\.{1,2}\/)[A-Za-z0-9_.-]+\/(?!\.{1,2}$)[A-Za-z0-9_.-]+$/;

/** A path inside a repository: relative, no `..` segment. */
const repoPath = z
  .string()
  .min(1)
  .max(1024)
  .refine((p) => !p.startsWith("/") && !p.split("/").includes(".."), {
    error: 'must be a path inside the repository (no leading "/", no "..")',
  });
/** A script's file name: a base name (no "/", "\\" or NUL), as a submitted script's filename is at most 255 characters. */
const scriptFilename = z
  .string()
  .min(1)
  .max(255)
  .refine((f) => !/[/\\\0]/.test(f) && f !== "." && f !== "..", { error: 'must be a file name, without "/", "\\" or NUL' });
const workflow = z
  .object({
    graph: z.string().min(1).max(128).optional(),
    script: z.string().min(1).optional(),
    /** The script child's file name (`build.py`): its interpreter is picked by the extension (core's pickInterpreter) unless `interpreter` is given. */
    filename: scriptFilename.optional(),
    interpreter: z.string().min(1).max(256).optional(),
    from_repo: z
      .object({
        repo: z.string().regex(REPO_FULL_NAME, { error: "must be owner/name" }),
        path: repoPath,
        ref: z.string().min(1).max(256).optional(),
        credential: credentialName,
      })
      .strict()
      .optional(),
    input: z.unknown().optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    const given = (["graph", "script", "from_repo"] as const).filter((k) => c[k] !== undefined);
    if (given.length !== 1)
      ctx.addIssue({
        code: "custom",
        message: `give exactly one of graph (a stored graph's name), script (its text) or from_repo; ${given.length === 0 ? "none was given" : `got ${given.join(", ")}`}`,
        path: given.length === 0 ? [] : [given[1]!],
      });
    if (c.filename !== undefined && c.script === undefined)
      ctx.addIssue({
        code: "custom",
        message: "only a script takes a filename (from_repo names its file by its path)",
        path: ["filename"],
      });
  });

const emit = z
  .object({
    type: strOrExpr((t) => flowErrorProblem(() => assertEmittable(t))),
    payload: z.unknown().optional(),
    key: strOrExpr().optional(),
  })
  .strict();

const endpoint = z.object({ event_type: eventType.optional() }).strict();

const SCHEMAS: Readonly<Record<(typeof NODE_TYPES)[number], z.ZodType>> = {
  http,
  code,
  shell,
  workflow,
  event,
  approval,
  switch: switchNode,
  trigger: endpoint,
  emit,
  webhook: endpoint,
};

type Issue = { code: string; path: PropertyKey[]; message: string; input?: unknown; keys?: string[]; issues?: Array<{ message: string }> };

const relativePath = (segments: readonly PropertyKey[]): string =>
  segments
    .map((s) =>
      typeof s === "number" ? `[${s}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(String(s)) ? `.${String(s)}` : `[${JSON.stringify(String(s))}]`,
    )
    .join("");

/** zod's issue as a config problem: a missing value is `required`, an unknown key names the key. */
export const configIssueProblem = (issue: Issue): ConfigProblem => {
  const path = relativePath(issue.path);
  if (issue.code === "unrecognized_keys" && issue.keys)
    return { path, message: `unknown key${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => JSON.stringify(k)).join(", ")}` };
  if (issue.code === "invalid_type" && issue.input === undefined) return { path, message: "required" };
  if (issue.code === "invalid_key") return { path, message: `the key ${issue.issues?.[0]?.message ?? issue.message}` };
  return { path, message: issue.message };
};

/** `config.with.model: required` as a config problem (`.with.model`, `required`). */
const connectorProblem = (text: string): ConfigProblem => {
  const m = /^config((?:[.[][^:]*)?): (.*)$/s.exec(text);
  return m ? { path: m[1]!, message: m[2]! } : { path: "", message: text };
};

/** A literal credential name by the credential name rule. */
const credentialNameProblems = (config: Record<string, unknown>): ConfigProblem[] => {
  const credential = config["credential"];
  const problem = typeof credential === "string" ? credentialNameProblem(credential) : undefined;
  return problem === undefined ? [] : [{ path: ".credential", message: problem }];
};

/** A connector node: `credential` when its manifest requires one; the rest of its config is the connector's (checked when it runs). */
const checkConnector = (type: string, config: Record<string, unknown>, ctx: NodeConfigContext): ConfigProblem[] => {
  if (!ctx.manifestOf) return [];
  const manifest = ctx.manifestOf(type);
  if (!manifest) return [{ path: "", message: `no connector has type "${type}"`, onType: true }];
  if (ctx.connectorProblems) return [...ctx.connectorProblems(type, config).map(connectorProblem), ...credentialNameProblems(config)];
  const credential = config["credential"];
  if (credential === undefined)
    return manifest.credential.required
      ? [{ path: ".credential", message: `required: ${type} needs a credential of kind ${manifest.credential.kinds.join(" or ")}` }]
      : [];
  const r = credentialName.safeParse(credential);
  return r.success ? [] : r.error.issues.map((i) => ({ path: ".credential", message: i.message }));
};

/** The problems of one node's config against its type. */
export const checkNodeConfig = (type: string, config: Record<string, unknown>, ctx: NodeConfigContext): ConfigProblem[] => {
  if ((NODE_TYPES as readonly string[]).includes(type)) {
    const r = SCHEMAS[type as (typeof NODE_TYPES)[number]].safeParse(config, { reportInput: true });
    return r.success ? [] : r.error.issues.map((i) => configIssueProblem(i as unknown as Issue));
  }
  if (CONNECTOR_TYPE.test(type)) return checkConnector(type, config, ctx);
  return [
    {
      path: "",
      onType: true,
      message: `unknown node type ${JSON.stringify(type.length > 64 ? `${type.slice(0, 64)}...` : type)}; use one of ${NODE_TYPES.join(", ")} or a connector type (<service>.<action>)`,
    },
  ];
};
