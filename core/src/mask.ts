/**
 * Masking of secret values in job output, on the byte stream (SECURITY.md "Secrets and masking").
 *
 * What is masked: every non-empty value whole; the value without surrounding whitespace; and for a
 * multi-line value each line, trimmed of surrounding whitespace, that still has 4 characters or more
 * (shorter lines are not registered, or every `{` of a log would vanish). Transformed values
 * (base64, slices, hashes) are not masked: that is the spec.
 *
 * How: the output is cut into masked regions, the union of every occurrence of every pattern
 * (overlapping or touching occurrences merge), and each region becomes one `***`. So with values
 * "abcdef" and "cdefgh", "abcdefgh" is `***`, and "secret-long" never shows as `***-long`.
 *
 * Streaming: `push` emits everything it can decide now and holds back only the shortest tail that
 * is still a proper prefix of some pattern (at most longest pattern − 1 bytes); pushing the same
 * bytes in any split gives the same output as pushing them at once. Output up to a newline goes out
 * at once unless a held byte could still start a pattern: correctness before eagerness.
 * `flush` (idle timeout, end of stream) emits the held tail as it is, but keeps it as look-behind,
 * so if later bytes complete a value the rest of it is still masked: only the flushed prefix shows.
 *
 * Speed: patterns are byte arrays grouped by first byte, longest first; the scan skips bytes that
 * start no pattern with one table look-up each. The test prints the throughput figure.
 */
export const MASK = "***";

export interface Masker {
  /** Returns the bytes that are safe to emit now (a fresh array, never a view of `chunk`). */
  push(chunk: Uint8Array): Uint8Array;
  /** Emits everything held back, masked. Call it on an idle timeout and at the end of the stream. */
  flush(): Uint8Array;
  /** How many bytes are held back, not yet emitted. */
  readonly pending: number;
}

const MASK_BYTES = new TextEncoder().encode(MASK);
const MIN_LINE_CHARS = 4;
const LINE_BREAK = /\r\n|\n|\r/;
const EMPTY = new Uint8Array(0);

interface PatternTable {
  /** Patterns by their first byte, longest first. */
  byFirst: ReadonlyArray<readonly Uint8Array[] | undefined>;
  /** 1 where some pattern starts with that byte. */
  starts: Uint8Array;
  /** 1 at (b0 << 8 | b1) where some pattern starts with bytes b0 b1 (or is the single byte b0). */
  starts2: Uint8Array;
  maxLen: number;
}

const patternStrings = (values: readonly string[]): Set<string> => {
  const out = new Set<string>();
  for (const value of values) {
    if (value === "") continue;
    out.add(value);
    const trimmed = value.trim();
    if (trimmed !== "") out.add(trimmed);
    if (!LINE_BREAK.test(value)) continue;
    for (const line of value.split(LINE_BREAK)) {
      const core = line.trim();
      if ([...core].length >= MIN_LINE_CHARS) out.add(core);
    }
  }
  return out;
};

const buildTable = (values: readonly string[]): PatternTable => {
  const encoder = new TextEncoder();
  const byFirst: Uint8Array[][] = [];
  const starts = new Uint8Array(256);
  const starts2 = new Uint8Array(65536);
  let maxLen = 0;
  for (const text of patternStrings(values)) {
    const bytes = encoder.encode(text);
    const first = bytes[0] as number;
    (byFirst[first] ??= []).push(bytes);
    starts[first] = 1;
    if (bytes.length > 1) starts2[(first << 8) | (bytes[1] as number)] = 1;
    else starts2.fill(1, first << 8, (first + 1) << 8);
    if (bytes.length > maxLen) maxLen = bytes.length;
  }
  for (const list of byFirst) list?.sort((a, b) => b.length - a.length);
  return { byFirst, starts, starts2, maxLen };
};

/** True when buf[at, at+len) equals pattern[0, len); the first byte is known to match. */
const sameBytes = (buf: Uint8Array, at: number, pattern: Uint8Array, len: number): boolean => {
  for (let j = 1; j < len; j++) if (buf[at + j] !== pattern[j]) return false;
  return true;
};

/** Length of the longest pattern that occurs whole at `at`, or 0. */
const longestMatchAt = (buf: Uint8Array, at: number, candidates: readonly Uint8Array[]): number => {
  const rest = buf.length - at;
  for (const p of candidates) if (p.length <= rest && sameBytes(buf, at, p, p.length)) return p.length;
  return 0;
};

/** True when the bytes from `at` to the end are a proper prefix of some pattern (it may still complete). */
const couldStartAt = (buf: Uint8Array, at: number, candidates: readonly Uint8Array[]): boolean => {
  const rest = buf.length - at;
  for (const p of candidates) {
    if (p.length <= rest) return false; // longest first: the rest are no longer
    if (sameBytes(buf, at, p, rest)) return true;
  }
  return false;
};

const concat = (pieces: readonly Uint8Array[]): Uint8Array => {
  let total = 0;
  for (const p of pieces) total += p.length;
  if (total === 0) return new Uint8Array(0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};

const copyOf = (a: Uint8Array, b: Uint8Array): Uint8Array => {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
};

/** A masker for one output stream. `values` are the secret values to hide; empty ones are ignored. */
export const createMasker = (values: readonly string[]): Masker => {
  const { byFirst, starts, starts2, maxLen } = buildTable(values);
  // Positions are absolute byte offsets in the stream.
  let held: Uint8Array = EMPTY; // kept bytes, starting at `base`
  let base = 0;
  let decided = 0; // every byte before this has been emitted (as itself or inside a `***`)
  let maskedUntil = 0; // end of the last masked region
  let lastWasMask = false; // the last thing emitted was a `***` (a touching occurrence merges into it)

  /** The hot loop: the first index from `i` where a pattern could start, or buf.length. */
  const nextCandidate = (buf: Uint8Array, from: number): number => {
    const last = buf.length - 1;
    let i = from;
    while (i < last && starts2[((buf[i] as number) << 8) | (buf[i + 1] as number)] === 0) i++;
    if (i === last && starts[buf[i] as number] === 0) i++;
    return i;
  };

  /**
   * Records an occurrence at buf[i, i+len): it extends the region of the `***` just emitted when it
   * overlaps or touches it, else the plain bytes before it go out and a new `***` follows.
   * An occurrence wholly inside bytes already emitted (look-behind after a flush) changes nothing.
   * Returns the new cursor (the first byte that may still go out as itself).
   */
  const markMatch = (buf: Uint8Array, i: number, len: number, cursor: number, out: Uint8Array[]): number => {
    const start = base + i;
    if (start + len <= decided) return cursor;
    if (start <= maskedUntil && lastWasMask) {
      maskedUntil = Math.max(maskedUntil, start + len);
    } else {
      if (i > cursor) out.push(buf.subarray(cursor, i));
      out.push(MASK_BYTES);
      lastWasMask = true;
      maskedUntil = start + len;
    }
    return Math.max(cursor, maskedUntil - base);
  };

  /** Scans held + chunk; in final mode nothing is held back. Returns the output. */
  const scan = (buf: Uint8Array, final: boolean): Uint8Array => {
    const n = buf.length;
    const out: Uint8Array[] = [];
    const tail = n - maxLen + 1; // only from here can the rest be a proper prefix of a pattern
    let cursor = Math.max(decided, maskedUntil) - base; // first byte that may go out as itself
    let holdFrom = -1;
    let i = 0;
    for (;;) {
      i = nextCandidate(buf, i);
      if (i >= n) break;
      const candidates = byFirst[buf[i] as number] as readonly Uint8Array[];
      if (i >= tail && holdFrom < 0 && couldStartAt(buf, i, candidates)) {
        holdFrom = i;
        if (!final) break;
      }
      const len = longestMatchAt(buf, i, candidates);
      if (len > 0) cursor = markMatch(buf, i, len, cursor, out);
      i++;
    }
    const stop = final || holdFrom < 0 ? n : holdFrom;
    if (stop > cursor) {
      out.push(buf.subarray(cursor, stop));
      lastWasMask = false;
    }
    const keepFrom = holdFrom < 0 ? n : holdFrom;
    const result = concat(out); // a copy: the caller may reuse `chunk`
    decided = Math.max(decided, base + stop);
    held = buf.slice(keepFrom);
    base += keepFrom;
    return result;
  };

  return {
    push(chunk: Uint8Array): Uint8Array {
      if (maxLen === 0) return chunk.slice();
      if (chunk.length === 0) return new Uint8Array(0);
      return scan(copyOf(held, chunk), false);
    },
    flush(): Uint8Array {
      if (base + held.length <= decided) return new Uint8Array(0);
      return scan(held, true);
    },
    get pending(): number {
      return Math.max(0, base + held.length - decided);
    },
  };
};

/** The strings a masker hides for these values (the registration rules above), for one-shot masking. */
export { patternStrings as maskPatterns };
