/**
 * Expressions in a graph (spec, "Graph document shape"): a node's `if`, and `{"$expr": <CEL>}` and
 * `{"$template": "text {{ <CEL> }} text"}` anywhere in its config. Every expression compiles through
 * core's one CEL wrapper (../cel.ts) with the variables `input` and `nodes` (an event node's
 * `when` also gets `event`). Values leave CEL as JSON: an int becomes a number (refused past 2^53),
 * a timestamp its RFC 3339 text, bytes their base64; a template hole is the value's text (a string
 * as is, anything else as JSON).
 */
import { celTypeName, compileCel, type CompiledCel } from "../cel.js";
import { FlowError } from "../errors.js";
import { GRAPH_LIMITS, type GraphScope } from "./model.js";

/** The variables of `if`, `$expr` and `$template`. */
export const GRAPH_VARIABLES: readonly string[] = ["input", "nodes"];
/** The variables of an event node's `when`. */
export const EVENT_WHEN_VARIABLES: readonly string[] = ["input", "nodes", "event"];

/** Deepest config a walk follows (parse.ts refuses deeper documents well before this). */
const WALK_DEPTH_LIMIT = 64;
/** Compiled expressions kept for reuse; the whole cache is dropped when it fills. */
const CACHE_LIMIT = 2000;
const cache = new Map<string, CompiledCel>();

/**
 * Compiles `source` (cached); throws FlowError invalid_argument with the position. A `predicate`
 * (a node's `if`, a switch case's or an event node's `when`) the checker types as other than bool
 * is refused (core/src/cel.ts), as a handler's `when` is: it could only fail when the node ran.
 */
export const compileGraphExpression = (source: string, variables: readonly string[] = GRAPH_VARIABLES, predicate = false): CompiledCel => {
  const key = `${predicate ? "p" : "v"}\u0000${variables.join(",")}\u0000${source}`;
  let compiled = cache.get(key);
  if (!compiled) {
    compiled = compileCel(source, { variables, predicate });
    if (cache.size >= CACHE_LIMIT) cache.clear();
    cache.set(key, compiled);
  }
  return compiled;
};

/** Checks one expression (compiled through core/src/cel.ts); the message keeps CEL's line and column. */
export const expressionProblem = (
  source: string,
  variables: readonly string[] = GRAPH_VARIABLES,
  predicate = false,
): string | undefined => {
  try {
    compileGraphExpression(source, variables, predicate);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
};

/** A config value that is an expression: exactly one key, `$expr` or `$template`. */
export type ConfigExpression = { kind: "$expr"; source: string } | { kind: "$template"; source: string };

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Whether `value` is an expression object. An object with a `$expr` or `$template` key and
 * anything else is not one: parse.ts reports it (`configExpressionProblem`).
 */
export const asConfigExpression = (value: unknown): ConfigExpression | undefined => {
  if (!isPlainObject(value)) return undefined;
  const keys = Object.keys(value);
  if (keys.length !== 1) return undefined;
  const source = value[keys[0]!];
  if (typeof source !== "string") return undefined;
  if (keys[0] === "$expr") return { kind: "$expr", source };
  if (keys[0] === "$template") return { kind: "$template", source };
  return undefined;
};

/** Why an object that uses `$expr`/`$template` is malformed; undefined when it is fine or is no expression. */
export const configExpressionProblem = (value: Record<string, unknown>): string | undefined => {
  for (const key of ["$expr", "$template"]) {
    if (!(key in value)) continue;
    if (Object.keys(value).length !== 1) return `an object with "${key}" may have no other key`;
    if (typeof value[key] !== "string") return `"${key}" must be a string`;
  }
  return undefined;
};

/** A `$template`'s pieces: literal text and `{{ expr }}` holes, in order. */
export type TemplatePart = { text: string } | { expr: string; offset: number };

/**
 * Splits a template into text and holes. `{{` without a closing `}}` and an empty hole are
 * refused (FlowError invalid_argument naming the position in the template).
 */
export const templateParts = (template: string): TemplatePart[] => {
  const parts: TemplatePart[] = [];
  let at = 0;
  let holes = 0;
  for (let open = template.indexOf("{{", at); open !== -1; open = template.indexOf("{{", at)) {
    if (open > at) parts.push({ text: template.slice(at, open) });
    const close = template.indexOf("}}", open + 2);
    if (close === -1) throw new FlowError("invalid_argument", `"{{" at character ${open + 1} has no closing "}}"`);
    const expr = template.slice(open + 2, close);
    if (expr.trim() === "") throw new FlowError("invalid_argument", `the hole at character ${open + 1} is empty`);
    if (++holes > GRAPH_LIMITS.templateHoles)
      throw new FlowError("invalid_argument", `a template has at most ${GRAPH_LIMITS.templateHoles} {{ }} holes`);
    parts.push({ expr, offset: open + 2 });
    at = close + 2;
  }
  if (at < template.length) parts.push({ text: template.slice(at) });
  return parts;
};

type JsonResult = { ok: true; value: unknown } | { ok: false; error: string };

/** A scalar CEL value as JSON; undefined when the value is a list or map. */
const scalarToJson = (value: unknown): JsonResult | undefined => {
  if (value === null || typeof value === "string" || typeof value === "boolean") return { ok: true, value };
  if (typeof value === "number")
    return Number.isFinite(value) ? { ok: true, value } : { ok: false, error: `${String(value)} is not a JSON number` };
  if (typeof value === "bigint") {
    const n = Number(value);
    return Number.isSafeInteger(n)
      ? { ok: true, value: n }
      : { ok: false, error: `the integer ${value} is too large for JSON (beyond 2^53)` };
  }
  if (value instanceof Date) return { ok: true, value: value.toISOString() };
  if (value instanceof Uint8Array) return { ok: true, value: Buffer.from(value).toString("base64") };
  return undefined;
};

/** A value out of CEL as JSON, or why it cannot be one. */
export const celToJson = (value: unknown, depth = 0): JsonResult => {
  if (depth > WALK_DEPTH_LIMIT) return { ok: false, error: `the value is nested more than ${WALK_DEPTH_LIMIT} levels deep` };
  const scalar = scalarToJson(value);
  if (scalar) return scalar;
  if (Array.isArray(value)) return jsonList(value, depth);
  if (value instanceof Map) return jsonMap([...(value as Map<unknown, unknown>).entries()], depth);
  if (isPlainObject(value) && Object.getPrototypeOf(value) === Object.prototype) return jsonMap(Object.entries(value), depth);
  return { ok: false, error: `a ${celTypeName(value)} value cannot be a JSON value` };
};

const jsonList = (list: unknown[], depth: number): { ok: true; value: unknown } | { ok: false; error: string } => {
  const out: unknown[] = [];
  for (const item of list) {
    const r = celToJson(item, depth + 1);
    if (!r.ok) return r;
    out.push(r.value);
  }
  return { ok: true, value: out };
};

const jsonMap = (entries: Array<[unknown, unknown]>, depth: number): { ok: true; value: unknown } | { ok: false; error: string } => {
  const out = new Map<string, unknown>();
  for (const [k, v] of entries) {
    const r = celToJson(v, depth + 1);
    if (!r.ok) return r;
    out.set(typeof k === "bigint" ? k.toString() : String(k), r.value);
  }
  return { ok: true, value: Object.fromEntries(out) };
};

const scopeVars = (scope: GraphScope, extra?: Record<string, unknown>): Record<string, unknown> => ({
  input: scope.input ?? null,
  nodes: scope.nodes,
  ...extra,
});

type Evaluated = { ok: true; value: unknown } | { ok: false; error: string };

const evalExpr = (source: string, vars: Record<string, unknown>): Evaluated => {
  let compiled: CompiledCel;
  try {
    compiled = compileGraphExpression(source, Object.keys(vars));
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
  const result = compiled.evaluate(vars);
  return result.ok ? celToJson(result.value) : result;
};

/** A template's text with each hole's value: strings as is, anything else as JSON. */
const evalTemplate = (template: string, vars: Record<string, unknown>): Evaluated => {
  let parts: TemplatePart[];
  try {
    parts = templateParts(template);
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
  let out = "";
  for (const part of parts) {
    if ("text" in part) {
      out += part.text;
      continue;
    }
    const r = evalExpr(part.expr, vars);
    if (!r.ok) return { ok: false, error: `{{${part.expr}}}: ${r.error}` };
    out += typeof r.value === "string" ? r.value : JSON.stringify(r.value);
  }
  return { ok: true, value: out };
};

const evaluateValue = (value: unknown, vars: Record<string, unknown>, path: string, depth: number): Evaluated => {
  if (depth > WALK_DEPTH_LIMIT) return { ok: false, error: `${path}: nested more than ${WALK_DEPTH_LIMIT} levels deep` };
  const expression = asConfigExpression(value);
  if (expression) {
    const r = expression.kind === "$expr" ? evalExpr(expression.source, vars) : evalTemplate(expression.source, vars);
    return r.ok ? r : { ok: false, error: `${path}: ${r.error}` };
  }
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (let i = 0; i < value.length; i++) {
      const r = evaluateValue(value[i], vars, `${path}[${i}]`, depth + 1);
      if (!r.ok) return r;
      out.push(r.value);
    }
    return { ok: true, value: out };
  }
  if (isPlainObject(value)) {
    const out = new Map<string, unknown>();
    for (const [k, v] of Object.entries(value)) {
      const r = evaluateValue(v, vars, `${path}.${k}`, depth + 1);
      if (!r.ok) return r;
      out.set(k, r.value);
    }
    return { ok: true, value: Object.fromEntries(out) };
  }
  return { ok: true, value };
};

/**
 * Resolves every `$expr` and `$template` in `config`, at any depth, against the scope. Never
 * throws: the first failure is returned with its place (`config.url: no such key: x ...`).
 */
export const evaluateConfig = (config: unknown, scope: GraphScope, extra?: Record<string, unknown>): Evaluated =>
  evaluateValue(config, scopeVars(scope, extra), "config", 0);

/** A node's `if`: true, false, or why it is neither (an error, or a result that is not a bool). */
export const evaluateIf = (expr: string, scope: GraphScope): { ok: true; value: boolean } | { ok: false; error: string } => {
  const r = evalCel(expr, scopeVars(scope));
  if (!r.ok) return r;
  if (typeof r.value !== "boolean") return { ok: false, error: `the expression returned ${celTypeName(r.value)}, not a bool` };
  return { ok: true, value: r.value };
};

/** One expression's raw CEL value (no JSON conversion); never throws. */
const evalCel = (source: string, vars: Record<string, unknown>): Evaluated => {
  try {
    return compileGraphExpression(source, Object.keys(vars)).evaluate(vars);
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
};

/**
 * An event node's `when` against an arriving event envelope: `{matched}` true only for `true`; an
 * error or a non-bool declines with `error` (spec: the event is declined privately).
 */
export const evaluateWhen = (expr: string, scope: GraphScope, event: unknown): { matched: boolean; error?: string } => {
  const r = evalCel(expr, scopeVars(scope, { event }));
  if (!r.ok) return { matched: false, error: r.error };
  if (typeof r.value !== "boolean") return { matched: false, error: `when: the expression returned ${celTypeName(r.value)}, not a bool` };
  return { matched: r.value };
};

/** A switch's chosen case: the first whose `when` is true, else the default; errors name the case. */
export const evaluateSwitch = (
  cases: ReadonlyArray<{ name: string; when: string }>,
  fallback: string | undefined,
  scope: GraphScope,
): { ok: true; branch: string } | { ok: false; error: string } => {
  for (const c of cases) {
    const r = evalCel(c.when, scopeVars(scope));
    if (!r.ok) return { ok: false, error: `case ${c.name}: ${r.error}` };
    if (r.value === true) return { ok: true, branch: c.name };
    if (r.value !== false) return { ok: false, error: `case ${c.name}: when returned ${celTypeName(r.value)}, not a bool` };
  }
  if (fallback !== undefined) return { ok: true, branch: fallback };
  return { ok: false, error: "no case matched and the switch has no default" };
};

const IDENT_START = /[A-Za-z_]/;
const IDENT_PART = /[A-Za-z0-9_]/;

/** The index just past the CEL string literal opening at `i` ('', "", triple-quoted; `raw`: no escapes). */
const skipString = (s: string, i: number, raw: boolean): number => {
  const c = s[i]!;
  const quote = s.startsWith(c.repeat(3), i) ? c.repeat(3) : c;
  let j = i + quote.length;
  for (; j < s.length && !s.startsWith(quote, j); j++) if (!raw && s[j] === "\\") j++;
  return j + quote.length;
};

const skipSpace = (s: string, i: number): number => {
  while (i < s.length && /\s/.test(s[i]!)) i++;
  return i;
};

/** The id read at `i` (just past `nodes`): `.id` or `["id"]`; undefined for anything else (`nodes[input.x]`). */
const nodeRefAt = (s: string, i: number): string | undefined => {
  let j = skipSpace(s, i);
  if (s[j] === ".") {
    j = skipSpace(s, j + 1);
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(s.slice(j, j + 128));
    return m?.[0];
  }
  if (s[j] !== "[") return undefined;
  j = skipSpace(s, j + 1);
  const m = /^(?:"([^"\\\n]*)"|'([^'\\\n]*)')\s*\]/.exec(s.slice(j, j + 200));
  return m ? (m[1] ?? m[2]) : undefined;
};

/**
 * The node ids an expression reads as `nodes.<id>` or `nodes["<id>"]`, outside string literals
 * (a best-effort scan, not a parse: `nodes[input.x]` is not counted). parse.ts refuses an id that
 * names no node, so a typo fails the check, not the run.
 */
export const referencedNodeIds = (source: string): string[] => {
  const ids: string[] = [];
  let i = 0;
  while (i < source.length) {
    const c = source[i]!;
    if (c === '"' || c === "'") i = skipString(source, i, false);
    else if (IDENT_START.test(c)) i = scanWord(source, i, ids);
    else i++;
  }
  return ids;
};

/** Reads the word at `i`: a string prefix (r, b, rb...) skips its literal, `nodes` adds the id it reads. */
const scanWord = (source: string, i: number, ids: string[]): number => {
  let j = i;
  while (j < source.length && IDENT_PART.test(source[j]!)) j++;
  const word = source.slice(i, j);
  if ((source[j] === '"' || source[j] === "'") && /^(?:[rR][bB]?|[bB][rR]?)$/.test(word)) return skipString(source, j, /[rR]/.test(word));
  if (word === "nodes" && !source.slice(0, i).trimEnd().endsWith(".")) {
    const id = nodeRefAt(source, j);
    if (id !== undefined) ids.push(id);
  }
  return j;
};
