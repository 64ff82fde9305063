/**
 * Pipeline expressions `${{ expr }}` (issue 11): CEL over `input`, `env`, `steps.<job>.output` and
 * `needs.<job>`, compiled through core's one CEL wrapper (../cel.ts), then translated to the graph's
 * scope (`input`, `nodes`): `steps` and `needs` become `nodes` (a job's last node has the job's id),
 * and `env` becomes a map literal of the job's literal env values. A text with holes becomes a graph
 * `{"$template"}` (or `{"$expr"}` when the text is one hole).
 */
import { compileCel, endOfString } from "../cel.js";
import { FlowError } from "../errors.js";

/** The variables a pipeline expression may read. */
export const PIPELINE_VARIABLES: readonly string[] = ["input", "env", "steps", "needs"];
/** A wait job's `when:` reads the event only (spec, "Predicates"). */
export const WAIT_WHEN_VARIABLES: readonly string[] = ["event"];

export type HolePart = { text: string } | { expr: string; offset: number };

/** Splits text into literal text and `${{ expr }}` holes; an unclosed or empty hole throws invalid_argument. */
export const splitHoles = (text: string): HolePart[] => {
  const parts: HolePart[] = [];
  let at = 0;
  for (let open = text.indexOf("${{", at); open !== -1; open = text.indexOf("${{", at)) {
    if (open > at) parts.push({ text: text.slice(at, open) });
    const close = text.indexOf("}}", open + 3);
    if (close === -1) throw new FlowError("invalid_argument", `"\${{" at character ${open + 1} has no closing "}}"`);
    const expr = text.slice(open + 3, close);
    if (expr.trim() === "") throw new FlowError("invalid_argument", `the \${{ }} at character ${open + 1} is empty`);
    parts.push({ expr, offset: open + 3 });
    at = close + 2;
  }
  if (at < text.length) parts.push({ text: text.slice(at) });
  return parts;
};

const IDENT_START = /[A-Za-z_]/;
const IDENT_PART = /[A-Za-z0-9_]/;

/** Whether the identifier at `start` is a top-level name (not a field after `.`). */
const isTopLevel = (source: string, start: number): boolean => {
  let k = start - 1;
  while (k >= 0 && /\s/.test(source[k]!)) k--;
  return k < 0 || source[k] !== ".";
};

/** A CEL map literal of the literal env values (strings as CEL strings; JSON's escapes are CEL's). */
export const envLiteral = (env: Readonly<Record<string, string>>): string =>
  `{${Object.entries(env)
    .map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`)
    .join(", ")}}`;

/**
 * The `env` an expression reads: the job's literal env values, inlined as a CEL map literal; or
 * `ENV_VARIABLE`, which keeps `env` a variable the evaluator passes (a concurrency group's env is
 * evaluated first, then given as a variable: pipeline/concurrency.ts).
 */
export type ExpressionEnv = Readonly<Record<string, string>> | typeof ENV_VARIABLE;
export const ENV_VARIABLE = "variable";

/** What a top-level name becomes in the graph's scope. */
const renamed = (word: string, env: ExpressionEnv): string => {
  if (word === "steps" || word === "needs") return "nodes";
  if (word !== "env") return word;
  return env === ENV_VARIABLE ? "env" : `(${envLiteral(env)})`;
};

/** Renames the pipeline's top-level names to the graph's: `steps`/`needs` -> `nodes`, `env` -> its literal (or kept, see ExpressionEnv). */
export const translateExpression = (source: string, env: ExpressionEnv): string => {
  let out = "";
  for (let i = 0; i < source.length;) {
    const c = source[i]!;
    let end = i + 1;
    if (c === '"' || c === "'") end = endOfString(source, i) + 1;
    else if (IDENT_START.test(c) && (i === 0 || !IDENT_PART.test(source[i - 1]!))) {
      while (end < source.length && IDENT_PART.test(source[end]!)) end++;
      const word = source.slice(i, end);
      out += isTopLevel(source, i) ? renamed(word, env) : word;
      i = end;
      continue;
    }
    out += source.slice(i, end);
    i = end;
  }
  return out;
};

/**
 * Compiles a pipeline expression (CEL's message and position on failure, thrown as invalid_argument).
 * A `predicate` (a job's `if:`, a wait's `when:`) the checker types as other than bool is refused.
 */
export const checkPipelineExpression = (source: string, variables: readonly string[] = PIPELINE_VARIABLES, predicate = false): void => {
  compileCel(source, { variables, predicate });
};

/** A whole-value expression: `${{ x }}` alone (surrounding blanks allowed) is `x`; else undefined. */
export const soleHole = (text: string): string | undefined => {
  const parts = splitHoles(text.trim());
  return parts.length === 1 && "expr" in parts[0]! ? parts[0].expr : undefined;
};

/**
 * `if:`/`when:` text: a `${{ }}` wrapper is accepted and stripped; bare CEL otherwise. It is one
 * expression: text around a hole, or two holes, is refused saying so (CEL's own word for it was
 * `Unexpected character: $`).
 */
export const stripWrapper = (text: string): string => {
  if (!text.includes("${{")) return text;
  const sole = soleHole(text);
  if (sole !== undefined) return sole;
  throw new FlowError(
    "invalid_argument",
    "is one expression: write it bare or inside one ${{ }}, e.g. ${{ input.a && input.b }}, not ${{ input.a }} && ${{ input.b }}",
  );
};

/**
 * A text value for the graph: unchanged without holes; `{"$expr"}` when it is one hole (the value
 * keeps its type) unless `asText`; else a `{"$template"}` (always text: a hole's non-string value
 * is its JSON) whose literal `{{` is written as a hole (graph templates have no escape).
 */
export const toGraphValue = (
  text: string,
  env: ExpressionEnv,
  variables: readonly string[] = PIPELINE_VARIABLES,
  asText = false,
): unknown => {
  const parts = splitHoles(text);
  if (!parts.some((p) => "expr" in p)) return text;
  for (const p of parts) if ("expr" in p) checkPipelineExpression(p.expr, variables);
  if (parts.length === 1 && !asText) return { $expr: translateExpression((parts[0] as { expr: string }).expr, env) };
  let template = "";
  for (const p of parts) {
    if ("text" in p) template += p.text.replaceAll("{{", '{{ "{{" }}');
    else {
      const cel = translateExpression(p.expr, env);
      if (cel.includes("}}")) throw new FlowError("invalid_argument", `a \${{ }} inside a longer text cannot contain "}}" (write "} }")`);
      template += `{{ ${cel} }}`;
    }
  }
  return { $template: template };
};

/**
 * Where the node takes only text (a shell command, an env value, an approval prompt): a text that is
 * one hole becomes its value's text (a number's digits, a list's JSON), not a typed value the node
 * would refuse when the job runs (`config.env.N: must be a string`).
 */
export const toGraphText = (text: string, env: ExpressionEnv): unknown => toGraphValue(text, env, PIPELINE_VARIABLES, true);

/** Every string inside a value (a `with:` map) through toGraphValue. */
export const toGraphValueDeep = (value: unknown, env: Readonly<Record<string, string>>): unknown => {
  if (typeof value === "string") return toGraphValue(value, env);
  if (Array.isArray(value)) return value.map((v) => toGraphValueDeep(v, env));
  if (typeof value === "object" && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toGraphValueDeep(v, env)]));
  return value;
};
