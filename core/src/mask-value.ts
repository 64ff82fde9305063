import { MASK, maskPatterns } from "./mask.js";

/**
 * One-shot masking of whole values a run hands the server (outputs, annotations, emitted payloads,
 * the error text): the same registration rules as the stream masker (mask.ts `maskPatterns`), on a
 * complete string, so nothing is held back and nothing is flushed early. As in the stream, every
 * occurrence of every pattern is found and the union of them (overlapping or touching occurrences
 * merge) becomes one `***` each: with values "abcdef" and "cdefgh", "abcdefgh" is `***`, and no
 * tail of a longer value shows.
 */
export interface ValueMasker {
  /** False when there is nothing to hide: callers may skip the work. */
  readonly active: boolean;
  text(value: string): string;
  /** A copy of a JSON value with every string, and every object key, masked. Never recursive. */
  json(value: unknown): unknown;
}

type Holder = Record<string | number, unknown>;

const maskText = (patterns: readonly string[], value: string): string => {
  const regions: Array<[number, number]> = [];
  for (const p of patterns) {
    for (let at = value.indexOf(p); at >= 0; at = value.indexOf(p, at + 1)) regions.push([at, at + p.length]);
  }
  if (regions.length === 0) return value;
  regions.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let out = "";
  let end = 0; // end of the last region: the plain text starts here
  for (const [from, to] of regions) {
    if (out !== "" && from <= end) {
      end = Math.max(end, to); // overlaps or touches the region just masked: one `***`
      continue;
    }
    out += value.slice(end, from) + MASK;
    end = to;
  }
  return out + value.slice(end);
};

/**
 * Walks the value with an explicit stack (a hostile payload may be nested thousands deep), copying
 * arrays and objects and replacing strings. Keys are defined, not assigned, so a `__proto__` key
 * stays a plain key. Two keys that mask to the same text keep the later value.
 */
const maskJson = (mask: (s: string) => string, value: unknown): unknown => {
  const root: Holder = { v: value };
  const stack: Array<[Holder, string | number]> = [[root, "v"]];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const [holder, key] = top;
    const v = holder[key];
    if (typeof v === "string") {
      holder[key] = mask(v);
    } else if (Array.isArray(v)) {
      const copy: unknown[] = v.slice();
      holder[key] = copy;
      for (let i = 0; i < copy.length; i++) stack.push([copy as unknown as Holder, i]);
    } else if (v !== null && typeof v === "object") {
      const copy: Holder = {};
      for (const [k, x] of Object.entries(v)) {
        Object.defineProperty(copy, mask(k), { value: x, enumerable: true, writable: true, configurable: true });
      }
      holder[key] = copy;
      for (const k of Object.keys(copy)) stack.push([copy, k]);
    }
  }
  return root["v"];
};

/** A masker for complete values. `values` are the secret values to hide; empty ones are ignored. */
export const createValueMasker = (values: readonly string[]): ValueMasker => {
  const patterns = [...maskPatterns(values)].sort((a, b) => b.length - a.length);
  const text = (value: string): string => (patterns.length === 0 ? value : maskText(patterns, value));
  return {
    active: patterns.length > 0,
    text,
    json: (value) => (patterns.length === 0 ? value : maskJson(text, value)),
  };
};
