/**
 * What Postgres can store, checked before anything is written. `text` and `jsonb` cannot hold
 * U+0000, and `jsonb` refuses a lone UTF-16 surrogate ("x\ud800y" is valid JSON but not Unicode);
 * a value nested thousands deep overflows the stack of every recursive walk after the parse
 * (JSON.stringify among them). Each was a 500 once; through these checks it is a 400 that names
 * the place.
 */
import { FlowError } from "./errors.js";

/**
 * Deepest nesting a JSON body may have: objects and arrays, the root counting as 1. Real GitHub
 * deliveries are about 10 deep; serde_json's default limit is 128 too.
 */
export const JSON_DEPTH_LIMIT = 128;

/** A high surrogate not followed by a low one, or a low one not preceded by a high one (String#isWellFormed, ES2024). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why a string cannot be stored as Postgres text, or undefined when it can. */
export const textProblem = (s: string): string | undefined => {
  if (s.includes("\0")) return "holds a NUL character (U+0000), which cannot be stored";
  if (LONE_SURROGATE.test(s)) return "holds a lone UTF-16 surrogate (such as \\ud800), which is not valid Unicode";
  return undefined;
};

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const keyPath = (parent: string, key: string): string => (IDENT.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`);

export interface JsonProblem {
  /** Where, as a JSON path from `root`: `body.payload.a[3].b`. */
  path: string;
  /** What, as a phrase after the path. */
  problem: string;
}

/**
 * The first place in a parsed JSON value that cannot be stored: a string or object key with NUL
 * or a lone surrogate, or nesting deeper than `limit`. Walks with its own stack, never recursion,
 * so a value nested 100,000 deep is measured, not a stack overflow.
 */
export const findJsonProblem = (value: unknown, root = "body", limit = JSON_DEPTH_LIMIT): JsonProblem | undefined => {
  const stack: Array<{ v: unknown; path: string; depth: number }> = [{ v: value, path: root, depth: 0 }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { v, path, depth } = item;
    if (typeof v === "string") {
      const p = textProblem(v);
      if (p) return { path, problem: p };
      continue;
    }
    if (v === null || typeof v !== "object") continue;
    if (depth + 1 > limit) return { path, problem: `is nested more than ${limit} levels deep` };
    const entries: Array<[string, unknown]> = Array.isArray(v) ? v.map((x, i) => [`${path}[${i}]`, x]) : [];
    if (!Array.isArray(v)) {
      for (const [k, x] of Object.entries(v)) {
        const p = textProblem(k);
        if (p) return { path: keyPath(path, k), problem: `has a key that ${p}` };
        entries.push([keyPath(path, k), x]);
      }
    }
    // Reversed onto the stack, so the first problem in document order is the one reported.
    for (let i = entries.length - 1; i >= 0; i--) stack.push({ v: entries[i]![1], path: entries[i]![0], depth: depth + 1 });
  }
  return undefined;
};

/** Throws the 400 for the first problem findJsonProblem finds; returns the value otherwise. */
export const assertStorableJson = <T>(value: T, root = "body"): T => {
  const found = findJsonProblem(value, root);
  if (found) {
    // A path 128 levels deep is mostly `[0][0]...`: the message shows its start, the details all of it.
    const where = found.path.length > 100 ? `${found.path.slice(0, 80)}...` : found.path;
    throw new FlowError("invalid_argument", `${where} ${found.problem}; nothing was recorded`, {
      details: { field: found.path, ...(found.problem.startsWith("is nested") ? { depth_limit: JSON_DEPTH_LIMIT } : {}) },
    });
  }
  return value;
};
