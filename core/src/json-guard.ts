/**
 * What Postgres can store, checked before anything is written. `text` and `jsonb` cannot hold
 * U+0000, and `jsonb` refuses a lone UTF-16 surrogate ("x\ud800y" is valid JSON but not Unicode);
 * a value nested thousands deep overflows the stack of every recursive walk after the parse
 * (JSON.stringify among them). Each was a 500 once; through these checks it is a 400 that names
 * the place. A number past double range (`1e400`) parses to Infinity, which JSON.stringify and
 * jsonb write as null: it is refused too, not stored as something the sender did not send.
 */
import { FlowError } from "./errors.js";

/**
 * Deepest nesting a JSON body may have: objects and arrays, the root counting as 1. Real GitHub
 * deliveries are about 10 deep; serde_json's default limit is 128 too.
 */
export const JSON_DEPTH_LIMIT = 128;

/** A high surrogate not followed by a low one, or a low one not preceded by a high one (String#isWellFormed, ES2024). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether `text` holds a lone UTF-16 surrogate (half of a pair): JSON can carry one, UTF-8 and Postgres cannot. */
export const hasLoneSurrogate = (text: string): boolean => LONE_SURROGATE.test(text);

/** Why a string cannot be stored as Postgres text, or undefined when it can. */
export const textProblem = (s: string): string | undefined => {
  if (s.includes("\0")) return "holds a NUL character (U+0000), which cannot be stored";
  if (hasLoneSurrogate(s)) return "holds a lone UTF-16 surrogate (such as \\ud800), which is not valid Unicode";
  return undefined;
};

const NON_FINITE = "is a number outside the range a JSON number can be stored in (about ±1.8e308; it would become null)";

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

export interface JsonProblem {
  /** Where, as a JSON path from the root's name: `body.payload.a[3].b`. */
  path: string;
  /** What, as a phrase after the path. */
  problem: string;
  kind: "text" | "depth" | "number";
}

/** A place in the value: its parent and its own key or index. Paths are spelled only for a problem. */
interface Place {
  parent: Place | undefined;
  seg: string | number;
}

const spell = (place: Place): string => {
  const segs: Array<string | number> = [];
  for (let p: Place | undefined = place; p; p = p.parent) segs.push(p.seg);
  let out = String(segs.pop());
  for (let i = segs.length - 1; i >= 0; i--) {
    const seg = segs[i]!;
    out += typeof seg === "number" ? `[${seg}]` : IDENT.test(seg) ? `.${seg}` : `[${JSON.stringify(seg)}]`;
  }
  return out;
};

interface WalkItem {
  readonly v: unknown;
  readonly at: Place;
  readonly depth: number;
}

/**
 * A key `__proto__` (JSON.parse makes it an own key) is refused as Fastify's body parser refuses it:
 * wherever the value is copied key by key, it sets the copy's prototype instead. A graph's node
 * config lost it that way and passed its unknown-key check.
 */
const PROTO_KEY = "__proto__";

/** The first key of an object that cannot be stored, as a problem at that key. */
const keyProblem = (v: object, at: Place): JsonProblem | undefined => {
  for (const k of Object.keys(v)) {
    const p =
      k === PROTO_KEY ? 'is "__proto__" (refused: where the value is copied key by key, it would set the prototype)' : textProblem(k);
    if (p) return { path: spell({ parent: at, seg: k }), problem: `has a key that ${p}`, kind: "text" };
  }
  return undefined;
};

/** Pushes the elements or values of `v` (the value of `item`) last to first, so problems are found in document order. */
const pushChildren = (stack: WalkItem[], v: object, item: WalkItem): void => {
  const { at, depth } = item;
  if (Array.isArray(v)) {
    for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i] as unknown, at: { parent: at, seg: i }, depth: depth + 1 });
    return;
  }
  const keys = Object.keys(v);
  for (let i = keys.length - 1; i >= 0; i--)
    stack.push({ v: (v as Record<string, unknown>)[keys[i]!], at: { parent: at, seg: keys[i]! }, depth: depth + 1 });
};

/** A string that cannot be stored as text, or a number that is not finite. */
const leafProblem = (v: unknown, at: Place): JsonProblem | undefined => {
  if (typeof v === "number") return Number.isFinite(v) ? undefined : { path: spell(at), problem: NON_FINITE, kind: "number" };
  const p = typeof v === "string" ? textProblem(v) : undefined;
  return p ? { path: spell(at), problem: p, kind: "text" } : undefined;
};

/**
 * The first place in a parsed JSON value that cannot be stored: a string or object key with NUL
 * or a lone surrogate, a number that is not finite, or nesting deeper than `limit`. Walks with its own stack, never recursion,
 * so a value nested 100,000 deep is measured, not a stack overflow.
 */
export const findJsonProblem = (value: unknown, root = "body", limit = JSON_DEPTH_LIMIT): JsonProblem | undefined => {
  const stack: WalkItem[] = [{ v: value, at: { parent: undefined, seg: root }, depth: 0 }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { v, at, depth } = item;
    if (v === null || typeof v !== "object") {
      const leaf = leafProblem(v, at);
      if (leaf) return leaf;
      continue;
    }
    if (depth + 1 > limit) return { path: spell(at), problem: `is nested more than ${limit} levels deep`, kind: "depth" };
    const badKey = Array.isArray(v) ? undefined : keyProblem(v, at);
    if (badKey) return badKey;
    pushChildren(stack, v, item);
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
      details: { field: found.path, ...(found.kind === "depth" ? { depth_limit: JSON_DEPTH_LIMIT } : {}) },
    });
  }
  return value;
};
