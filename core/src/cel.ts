import { Environment } from "@marcbachmann/cel-js";
import type { ASTNode } from "@marcbachmann/cel-js";
import { FlowError } from "./errors.js";

/**
 * The one wrapper over `@marcbachmann/cel-js` (ARCHITECTURE.md "Decisions": Expressions). Handler
 * `--when`, waits, graph `if`/`$expr`/`$template` and pipeline `${{ }}` all compile through here.
 *
 * Guards, in order (SECURITY.md "Expressions and input"):
 * 1. before parsing: the source is at most CEL_SOURCE_LIMIT characters and nests brackets at most
 *    CEL_DEPTH_LIMIT deep (cel-js's own `maxDepth` stays on as a backstop; it also counts `a.b.c`);
 * 2. after parsing, before the expression is accepted: every `matches()` has a string literal
 *    pattern that passes `inspectMatchesPattern` (rules below), and the type check passes;
 * 3. at evaluation: `matches()` refuses a subject longer than its pattern's input limit, and the
 *    calls of one evaluation share a work budget.
 *
 * cel-js semantics kept on purpose: reading an absent field is an error (`has()` guards it, but
 * `has(a.b.c)` still needs `a.b`); JSON numbers are doubles, so `event.count == 3` holds while
 * `event.count + 1` is an error (write `int(event.count) + 1`); integer results are `bigint`.
 */

export const CEL_SOURCE_LIMIT = 4096;
export const CEL_DEPTH_LIMIT = 32;
export const MATCHES_PATTERN_LIMIT = 512;
/** The longest string any `matches()` reads; a pattern's own limit may be lower. */
export const MATCHES_INPUT_LIMIT = 65_536;
/**
 * Worst-case backtracking steps the `matches()` calls of one evaluation may take together; measured
 * on Node 20 the worst patterns at their input limits take 0.1-0.25 s.
 */
export const MATCHES_STEP_BUDGET = 100_000_000;
/** A pattern whose input limit would fall below this is refused as too ambiguous to be useful. */
const MATCHES_MIN_INPUT = 64;
/** At most this many ways through a pattern's `?`, `{n,m}` and `|` (each multiplies the work). */
const MATCHES_CHOICE_LIMIT = 4096;

export type CelResult = { ok: true; value: unknown } | { ok: false; error: string };

export interface CompiledCel {
  readonly source: string;
  /** Never throws: a runtime error (absent field, no overload, oversized `matches` input) is returned. */
  evaluate(vars: Record<string, unknown>): CelResult;
}

export interface CompileCelOptions {
  /** The variables the expression may read; each is dynamically typed. Default `["event"]`. */
  variables?: readonly string[];
  /**
   * A predicate (a handler's `when`): an expression whose type the checker knows to be other than
   * bool (`"prod"`, `1 + 2`, `[1]`) is refused, since it would decline every event. `dyn` (a field
   * read, `event.payload.ok`) passes: its value decides at delivery.
   */
  predicate?: boolean;
}

const environments = new Map<string, Environment>();

const environmentFor = (variables: readonly string[]): Environment => {
  const key = [...variables].sort().join(",");
  let env = environments.get(key);
  if (!env) {
    env = new Environment({ limits: { maxDepth: 3 * CEL_DEPTH_LIMIT, maxAstNodes: CEL_SOURCE_LIMIT } });
    for (const name of new Set(variables)) env.registerVariable(name, "dyn");
    environments.set(key, env);
  }
  return env;
};

/** `line L, column C` (both from 1) of a character offset. */
export const celPosition = (source: string, offset: number): string => {
  const before = source.slice(0, Math.max(0, offset)).split("\n");
  return `line ${before.length}, column ${(before.at(-1)?.length ?? 0) + 1}`;
};

const invalid = (source: string, message: string, offset?: number): FlowError =>
  new FlowError("invalid_argument", offset === undefined ? message : `${message} at ${celPosition(source, offset)}`, {
    details: offset === undefined ? undefined : { offset },
  });

/** The index of the last character of the string literal opening at `i` (CEL: '', "", triple, raw r""). */
export const endOfString = (source: string, i: number): number => {
  const c = source[i]!;
  const quote = source.startsWith(c.repeat(3), i) ? c.repeat(3) : c;
  const raw = /[rR]/.test(source[i - 1] ?? "");
  let j = i + quote.length;
  for (; j < source.length && !source.startsWith(quote, j); j++) if (!raw && source[j] === "\\") j++;
  return j + quote.length - 1;
};

/** Where bracket nesting (outside string literals and `//` comments) first goes past the limit. */
const overDepthAt = (source: string): number | undefined => {
  let depth = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === "/" && source[i + 1] === "/") i = source.indexOf("\n", i) === -1 ? source.length : source.indexOf("\n", i);
    else if (c === '"' || c === "'") i = endOfString(source, i);
    else if ("([{".includes(c) && ++depth > CEL_DEPTH_LIMIT) return i;
    else if (")]}".includes(c)) depth = Math.max(0, depth - 1);
  }
  return undefined;
};

type AnyNode = ASTNode & { handle?: unknown };
type MatchesCall = { node: AnyNode; pattern: AnyNode | undefined };

const isNode = (node: unknown): node is AnyNode => !!node && typeof node === "object" && "op" in node;

/** `n` as a `matches` call, method (`s.matches(p)`) or global (`matches(s, p)`), if it is one. */
const asMatchesCall = (n: AnyNode): MatchesCall | undefined => {
  if (n.op === "rcall" && n.args[0] === "matches") return { node: n, pattern: n.args[2][0] };
  if (n.op === "call" && n.args[0] === "matches") return { node: n, pattern: n.args[1][1] };
  return undefined;
};

/** Every `s.matches(p)` (and global `matches(s, p)`) call in the tree. */
const findMatches = (node: unknown, found: MatchesCall[] = []): MatchesCall[] => {
  if (Array.isArray(node)) {
    for (const child of node) findMatches(child, found);
    return found;
  }
  if (!isNode(node)) return found;
  const call = asMatchesCall(node);
  if (call) found.push(call);
  if (node.op !== "value" && node.op !== "id") findMatches(node.args, found);
  return found;
};

const guardMatches = (source: string, call: MatchesCall): MatchesCost => {
  const { pattern } = call;
  if (pattern?.op !== "value" || typeof pattern.args !== "string") {
    throw invalid(source, "matches() needs a string literal pattern, not a variable or an expression,", pattern?.start ?? call.node.start);
  }
  try {
    return inspectMatchesPattern(pattern.args);
  } catch (error) {
    throw invalid(source, (error as Error).message, pattern.start);
  }
};

/**
 * Meters the call: a subject over the pattern's input limit, or calls whose summed worst case
 * (choices x length^exponent) goes over MATCHES_STEP_BUDGET in one evaluation (a comprehension
 * can call matches() once per list element), is an evaluation error. cel-js offers no hook for
 * this (its built-in `matches` cannot be overridden), so this wraps the checked AST node's
 * `handle` (cel-js 8.0.0, pinned exactly); a compile fails closed if that internal moved.
 */
const meterMatches = (source: string, node: AnyNode, cost: MatchesCost, meter: { spent: number }): void => {
  const original = node.handle;
  if (typeof original !== "function") {
    throw new FlowError("internal", "cannot guard matches(): the pinned cel-js internals changed; see core/src/cel.ts");
  }
  const where = celPosition(source, node.start);
  // Both forms get the subject first: [receiver, pattern] or [subject, pattern].
  node.handle = (args: unknown[], ...rest: unknown[]): unknown => {
    const subject = args[0];
    if (typeof subject === "string") {
      if (subject.length > cost.inputLimit) {
        throw new Error(
          `matches() reads at most ${cost.inputLimit} characters with this pattern; the string has ${subject.length} (use contains(), startsWith() or a narrower field) at ${where}`,
        );
      }
      meter.spent += cost.choices * subject.length ** cost.exponent;
      if (meter.spent > MATCHES_STEP_BUDGET) {
        throw new Error(
          `matches() calls in one evaluation went over their work budget (about ${MATCHES_STEP_BUDGET} regex steps); narrow the data they read at ${where}`,
        );
      }
    }
    return (original as (...a: unknown[]) => unknown)(args, ...rest);
  };
};

const offsetOf = (error: unknown): number | undefined => {
  const start = (error as { range?: { start?: unknown } } | undefined)?.range?.start;
  return typeof start === "number" ? start : undefined;
};

/** cel-js's one-line message (`summary`, without its source excerpt) and where. */
const errorText = (source: string, error: unknown): string => {
  const e = error as { summary?: unknown; message?: unknown };
  const text = typeof e.summary === "string" ? e.summary : typeof e.message === "string" ? e.message : String(error);
  const offset = offsetOf(error);
  return offset === undefined ? text : `${text} at ${celPosition(source, offset)}`;
};

const compileError = (source: string, error: unknown): FlowError => {
  const offset = offsetOf(error);
  return new FlowError("invalid_argument", errorText(source, error), {
    cause: error,
    details: offset === undefined ? undefined : { offset },
  });
};

/** A predicate's checked type: bool, or dyn (a field read, decided at delivery); anything else is refused. */
const assertPredicateType = (source: string, type: string | undefined): void => {
  if (type === "bool" || type === "dyn" || type === undefined) return;
  throw invalid(source, `the expression is a ${type}, not a bool: a predicate must be true or false (e.g. event.payload.env == "prod")`);
};

/** Compiles (parses, guards and type-checks) a CEL expression; throws FlowError invalid_argument. */
export const compileCel = (source: string, opts: CompileCelOptions = {}): CompiledCel => {
  if (typeof source !== "string" || source.trim() === "") throw invalid(String(source), "CEL expression is empty");
  if (source.length > CEL_SOURCE_LIMIT) {
    throw invalid(source, `CEL expression is ${source.length} characters; the limit is ${CEL_SOURCE_LIMIT}`);
  }
  const over = overDepthAt(source);
  if (over !== undefined) throw invalid(source, `CEL expression nests brackets deeper than ${CEL_DEPTH_LIMIT} levels`, over);

  const env = environmentFor(opts.variables ?? ["event"]);
  let parsed: ReturnType<Environment["parse"]>;
  try {
    parsed = env.parse(source);
  } catch (error) {
    throw compileError(source, error);
  }
  const costs = findMatches(parsed.ast).map((call) => [call, guardMatches(source, call)] as const);
  const checked = parsed.check();
  if (!checked.valid) throw compileError(source, checked.error);
  if (opts.predicate) assertPredicateType(source, checked.type);
  const meter = { spent: 0 };
  for (const [call, cost] of costs) meterMatches(source, call.node, cost, meter);

  return {
    source,
    evaluate(vars) {
      meter.spent = 0;
      try {
        const value: unknown = parsed(vars);
        if (value instanceof Promise) return { ok: false, error: "expression evaluated asynchronously" };
        return { ok: true, value };
      } catch (error) {
        return { ok: false, error: errorText(source, error) };
      }
    },
  };
};

/** The CEL type name of a value, for messages. */
export const celTypeName = (value: unknown): string => {
  if (value === null || value === undefined) return "null";
  if (typeof value === "bigint") return "int";
  if (typeof value === "number") return "double";
  if (typeof value === "boolean") return "bool";
  if (typeof value === "string") return "string";
  if (value instanceof Uint8Array) return "bytes";
  if (Array.isArray(value)) return "list";
  if (value instanceof Date) return "timestamp";
  return "map";
};

/** Runs a predicate: `matched` only for `true`; an error or a non-bool result declines with `error`. */
export const evaluatePredicate = (compiled: CompiledCel, vars: Record<string, unknown>): { matched: boolean; error?: string } => {
  const result = compiled.evaluate(vars);
  if (!result.ok) return { matched: false, error: result.error };
  if (typeof result.value !== "boolean") return { matched: false, error: `predicate returned ${celTypeName(result.value)}, not a bool` };
  return { matched: result.value };
};

/*
 * matches() patterns. cel-js runs them on JS RegExp, a backtracking engine, so a pattern must be
 * safe for it before it may read event data (RE2 itself guarantees linear time; V8 does not):
 * - no backreferences (\1, \k<name>) and no lookaround ((?=, (?!, (?<=, (?<!): RE2 has neither;
 * - a repeated group (*, +, {n,}, {n,m}) may not contain a quantifier or an alternation: (a+)+,
 *   (a*)*, (a|a)* and (a|ab)* try exponentially many ways to split the input. Write a character
 *   class instead ([ab]*);
 * - even then, each unbounded repeat multiplies the work by up to the input length, an
 *   unanchored pattern is retried at every position, and each `?`, `{n,m}` or `|` multiplies the
 *   ways to try: measured on Node 20, `.*.*x` takes 22 s on 4096 characters and `.*x` 6 s on
 *   64 KiB. So a pattern's subject is capped at
 *   min(MATCHES_INPUT_LIMIT, (MATCHES_STEP_BUDGET / choices) ^ (1 / exponent)), where exponent is
 *   the number of unbounded repeats (*, +, {n,}), plus one unless the pattern is anchored with ^,
 *   and choices is the product of the ways each `?`, `{n,m}` and `|` adds. A pattern with more
 *   than MATCHES_CHOICE_LIMIT choices, or whose cap would be under 64 characters, is refused.
 */
interface Shape {
  repeats: number;
  choices: number;
  quantified: boolean;
  alternation: boolean;
  branches: number;
}

const QUANTIFIER = /^(?:([*+?])|\{(\d+)(?:(,)(\d*))?\})\??/;
const plain = (): Shape => ({ repeats: 0, choices: 1, quantified: false, alternation: false, branches: 1 });

/** How many times a quantifier lets its atom repeat: `*` `+` `?`, `{n}`, `{n,}` or `{n,m}`. */
const quantifierBounds = (q: RegExpExecArray): { min: number; max: number } => {
  const [, sign, from, comma, to] = q;
  if (sign !== undefined) return { min: sign === "+" ? 1 : 0, max: sign === "?" ? 1 : Infinity };
  const min = Number(from);
  if (comma === undefined) return { min, max: min };
  return { min, max: to === "" ? Infinity : Number(to) };
};

/** Applies the quantifier at `at.i` (if any) to `atom`. */
const quantify = (p: string, at: { i: number }, atom: Shape, group: boolean): Shape => {
  const q = QUANTIFIER.exec(p.slice(at.i));
  if (!q) return atom;
  at.i += q[0].length;
  const { min, max } = quantifierBounds(q);
  if (max > 1 && group && (atom.quantified || atom.alternation)) {
    throw new Error("a repeated group may not contain a quantifier or an alternation (write a character class, e.g. [ab]+ for (a|b)+)");
  }
  const repeats = atom.repeats + (max === Infinity ? 1 : 0);
  const choices = max === Infinity ? atom.choices : atom.choices * (max - min + 1);
  return { ...atom, repeats, choices, quantified: true };
};

/** Reads one atom at `at.i` (a group, a class, an escape or a character); refuses what RE2 lacks. */
const parseAtom = (p: string, at: { i: number }): Shape => {
  const c = p[at.i]!;
  if (c === "(") {
    if (/^\(\?<?[=!]/.test(p.slice(at.i, at.i + 4))) throw new Error("lookahead and lookbehind are not RE2-safe");
    at.i += /^\((?:\?:|\?<[A-Za-z_$][\w$]*>)?/.exec(p.slice(at.i))![0].length;
    const inner = parseRegex(p, at);
    at.i++; // the closing parenthesis: new RegExp() already proved it is there
    return { ...inner, branches: 1 };
  }
  if (c === "[") {
    for (at.i++; at.i < p.length && p[at.i] !== "]"; at.i++) if (p[at.i] === "\\") at.i++;
  } else if (c === "\\") {
    if (/[1-9]/.test(p[at.i + 1] ?? "") || p.startsWith("\\k<", at.i)) throw new Error("backreferences are not RE2-safe");
    at.i++;
  }
  at.i++;
  return plain();
};

const parseRegex = (p: string, at: { i: number }): Shape => {
  const branches: Shape[] = [];
  let seq = plain();
  while (at.i < p.length && p[at.i] !== ")") {
    const c = p[at.i]!;
    if (c === "|") {
      branches.push(seq);
      seq = plain();
      at.i++;
      continue;
    }
    let atom = parseAtom(p, at);
    atom = quantify(p, at, atom, c === "(");
    seq = {
      repeats: seq.repeats + atom.repeats,
      choices: seq.choices * atom.choices,
      quantified: seq.quantified || atom.quantified,
      alternation: seq.alternation || atom.alternation,
      branches: 1,
    };
  }
  if (branches.length === 0) return seq;
  branches.push(seq);
  return {
    repeats: Math.max(...branches.map((b) => b.repeats)),
    choices: branches.reduce((sum, b) => sum + b.choices, 0),
    quantified: branches.some((b) => b.quantified),
    alternation: true,
    branches: branches.length,
  };
};

/** A checked pattern's worst case: about `choices x length^exponent` backtracking steps. */
export interface MatchesCost {
  exponent: number;
  choices: number;
  /** The longest subject this pattern may read. */
  inputLimit: number;
}

/** Checks a `matches()` pattern (rules above); throws an Error that says what is wrong with it. */
export const inspectMatchesPattern = (pattern: string): MatchesCost => {
  const quoted = JSON.stringify(pattern.length > 60 ? `${pattern.slice(0, 60)}...` : pattern);
  if (pattern.length > MATCHES_PATTERN_LIMIT) {
    throw new Error(`matches() pattern is ${pattern.length} characters; the limit is ${MATCHES_PATTERN_LIMIT}`);
  }
  try {
    new RegExp(pattern);
  } catch (error) {
    throw new Error(`matches() pattern ${quoted} is not a valid regular expression: ${(error as Error).message}`);
  }
  let shape: Shape;
  try {
    shape = parseRegex(pattern, { i: 0 });
  } catch (error) {
    throw new Error(`matches() pattern ${quoted} is refused: ${(error as Error).message}`);
  }
  const anchored = pattern.startsWith("^") && shape.branches === 1;
  const exponent = shape.repeats + (anchored ? 0 : 1);
  const limit = exponent === 0 ? MATCHES_INPUT_LIMIT : Math.floor((MATCHES_STEP_BUDGET / shape.choices) ** (1 / exponent));
  if (shape.choices > MATCHES_CHOICE_LIMIT) {
    throw new Error(
      `matches() pattern ${quoted} is refused: its ?, {n,m} and | parts make ${shape.choices} ways to try; the limit is ${MATCHES_CHOICE_LIMIT}`,
    );
  }
  if (limit < MATCHES_MIN_INPUT) {
    throw new Error(
      `matches() pattern ${quoted} is refused: with ${shape.repeats} unbounded repeats it could read only ${limit} characters safely (anchor it with ^, or use fewer repeats)`,
    );
  }
  return { exponent, choices: shape.choices, inputLimit: Math.min(limit, MATCHES_INPUT_LIMIT) };
};
