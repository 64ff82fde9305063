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
 * Streaming: `push` emits everything it can decide now and holds back only the longest tail that
 * is still a proper prefix of some pattern (at most longest pattern − 1 bytes); pushing the same
 * bytes in any split gives the same output as pushing them at once. Output up to a newline goes out
 * at once unless a held byte could still start a pattern: correctness before eagerness. There is
 * no idle flush: a pause cannot tell the rest of a value is not coming, so a held tail goes out only
 * when later bytes show it is not a value (then as itself) or at the end of the stream (`end`).
 * At the end a held tail of 4 characters or more (the shortest line of a multi-line value that is
 * masked) becomes `***`; a shorter one goes out as itself: 1-3 characters say little of a value,
 * and masking them would turn the last `T` or newline of a stream into `***`.
 *
 * One log, many streams: `createLogMasker` masks a log that several streams (stdout and stderr)
 * write into in two stages: first all bytes in arrival order (half a value on stdout and the rest
 * on stderr, adjacent in the log, is one `***`), then what that lets out, stream by stream (a value
 * printed on stdout with stderr writes in between is still masked). Each piece out keeps the
 * stream its bytes came from; a `***` belongs to the stream its first byte came from. A stream's
 * end decides nothing while another is open: that one may still complete a value with its bytes.
 *
 * Speed: patterns are byte arrays grouped by first byte, longest first; the scan skips bytes that
 * start no pattern with one table look-up each. The test prints the throughput figure.
 */
export const MASK = "***";

export interface Masker {
  /** Returns the bytes that are safe to emit now (a fresh array, never a view of `chunk`). */
  push(chunk: Uint8Array): Uint8Array;
  /**
   * The end of the stream: emits what is held back (a held tail of 4 characters or more as `***`).
   * Not for an idle timeout: a pause does not show that the rest of a value is not coming.
   */
  end(): Uint8Array;
  /** How many bytes are held back, not yet emitted (at most the longest value − 1). */
  readonly pending: number;
}

/** A run of a log's output that came from one stream. */
export interface LogPiece<S extends string> {
  readonly stream: S;
  readonly bytes: Uint8Array;
}

/** A masker for one log that several streams write into (see "One log, many streams" above). */
export interface LogMasker<S extends string> {
  /** What is safe to put in the log now, in order, each piece with its stream. */
  push(stream: S, chunk: Uint8Array): LogPiece<S>[];
  /** `stream` ended: its held tail goes out as `Masker.end` says; once every stream ended, the log's too. */
  end(stream: S): LogPiece<S>[];
  /** How many bytes are held back in all. */
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

/**
 * The table of no pattern: shared (a table is only read once built), so a job without secrets
 * (most of them) does not zero 64 KiB per stream for nothing.
 */
const NO_PATTERNS: PatternTable = { byFirst: [], starts: new Uint8Array(256), starts2: new Uint8Array(65536), maxLen: 0 };

const buildTable = (values: readonly string[]): PatternTable => {
  if (!values.some((v) => v !== "")) return NO_PATTERNS;
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

/** Characters in `bytes` (UTF-8): every byte but a continuation byte starts one. */
const charCount = (bytes: Uint8Array): number => {
  let n = 0;
  for (const b of bytes) if ((b & 0xc0) !== 0x80) n++;
  return n;
};

/** Output of the scan: `at` is the stream offset of the first input byte the piece stands for. */
interface Piece {
  readonly at: number;
  readonly bytes: Uint8Array;
  readonly masked: boolean;
}

interface MaskCore {
  /** Pieces may be views of `chunk` or of internal buffers: copy before keeping them. */
  push(chunk: Uint8Array): Piece[];
  end(): Piece[];
  readonly pending: number;
}

const createCore = (values: readonly string[]): MaskCore => {
  const { byFirst, starts, starts2, maxLen } = buildTable(values);
  // Positions are absolute byte offsets in the stream. `held` starts at `base`; every byte before
  // `base` is out (as itself or inside a `***`); `held` is the longest tail that is a proper
  // prefix of a pattern (none of its bytes is out, unless a `***` already covers them).
  let held: Uint8Array = EMPTY;
  let base = 0;
  let maskedUntil = 0; // end of the last masked region
  let lastWasMask = false; // the last thing emitted was a `***` (a touching occurrence merges into it)
  let ended = false;

  /** The hot loop: the first index from `i` where a pattern could start, or buf.length. */
  const nextCandidate = (buf: Uint8Array, from: number): number => {
    const last = buf.length - 1;
    let i = from;
    while (i < last && starts2[((buf[i] as number) << 8) | (buf[i + 1] as number)] === 0) i++;
    if (i === last && starts[buf[i] as number] === 0) i++;
    return i;
  };

  /**
   * Records an occurrence at buf[at.i, at.i+at.len): it extends the region of the `***` just emitted when it
   * overlaps or touches it, else the plain bytes before it go out and a new `***` follows.
   * Returns the new cursor (the first byte that may still go out as itself).
   */
  const markMatch = (buf: Uint8Array, at: { readonly i: number; readonly len: number }, cursor: number, out: Piece[]): number => {
    const { i, len } = at;
    const start = base + i;
    if (start <= maskedUntil && lastWasMask) {
      maskedUntil = Math.max(maskedUntil, start + len);
    } else {
      if (i > cursor) out.push({ at: base + cursor, bytes: buf.subarray(cursor, i), masked: false });
      out.push({ at: start, bytes: MASK_BYTES, masked: true });
      lastWasMask = true;
      maskedUntil = start + len;
    }
    return Math.max(cursor, maskedUntil - base);
  };

  /** Scans held + chunk; in final mode nothing is held back. */
  const scan = (buf: Uint8Array, final: boolean): Piece[] => {
    const n = buf.length;
    const out: Piece[] = [];
    const tail = n - maxLen + 1; // only from here can the rest be a proper prefix of a pattern
    let cursor = Math.max(0, maskedUntil - base); // first byte that may go out as itself
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
      if (len > 0) cursor = markMatch(buf, { i, len }, cursor, out);
      i++;
    }
    // Everything before keepFrom goes out (as itself or masked); the rest is held for the next chunk.
    const keepFrom = final || holdFrom < 0 ? n : holdFrom;
    if (keepFrom > cursor) {
      out.push({ at: base + cursor, bytes: buf.subarray(cursor, keepFrom), masked: false });
      lastWasMask = false;
    }
    held = buf.slice(keepFrom);
    base += keepFrom;
    return out;
  };

  /** The end: a held tail of MIN_LINE_CHARS characters or more is hidden, a shorter one goes out. */
  const endTail = (): Piece[] => {
    if (held.length === 0) return [];
    if (charCount(held) < MIN_LINE_CHARS) return scan(held, true);
    const from = Math.max(base, maskedUntil);
    const to = base + held.length;
    held = EMPTY;
    base = to;
    if (from >= to) return [];
    const touches = lastWasMask && maskedUntil >= from;
    maskedUntil = to;
    lastWasMask = true;
    return touches ? [] : [{ at: from, bytes: MASK_BYTES, masked: true }];
  };

  return {
    push(chunk: Uint8Array): Piece[] {
      if (ended) throw new Error("push after the end of the stream");
      if (chunk.length === 0) return [];
      if (maxLen === 0) {
        base += chunk.length;
        return [{ at: base - chunk.length, bytes: chunk, masked: false }];
      }
      return scan(copyOf(held, chunk), false);
    },
    end(): Piece[] {
      if (ended) return [];
      ended = true;
      return endTail();
    },
    get pending(): number {
      return held.length;
    },
  };
};

const bytesOf = (pieces: readonly Piece[]): Uint8Array => concat(pieces.map((p) => p.bytes));

/** A masker for one output stream. `values` are the secret values to hide; empty ones are ignored. */
export const createMasker = (values: readonly string[]): Masker => {
  const core = createCore(values);
  return {
    push: (chunk) => bytesOf(core.push(chunk)),
    end: () => bytesOf(core.end()),
    get pending() {
      return core.pending;
    },
  };
};

/** A masker for one log that the named streams write into, masked all together and each alone. */
export const createLogMasker = <S extends string>(values: readonly string[], streams: readonly S[]): LogMasker<S> => {
  const own = new Map<S, MaskCore>(streams.map((s) => [s, createCore(values)]));
  const open = new Set<S>(streams);
  const merged = createCore(values);
  // Which stream each byte the merged stage took came from: runs of [.., end) in arrival order.
  let origin: { end: number; stream: S }[] = [];
  let taken = 0;

  const stageOf = (stream: S): MaskCore => {
    const core = own.get(stream);
    if (core === undefined) throw new Error(`not a stream of this log: ${stream}`);
    return core;
  };

  /** Collects output by stream runs: neighbours of one stream join (copied once, by `joined`). */
  type Runs = { stream: S; parts: Uint8Array[] }[];
  const addRun = (runs: Runs, stream: S, bytes: Uint8Array): void => {
    if (bytes.length === 0) return;
    const last = runs.at(-1);
    if (last?.stream === stream) last.parts.push(bytes);
    else runs.push({ stream, parts: [bytes] });
  };
  const joined = (runs: Runs): LogPiece<S>[] => runs.map((r) => ({ stream: r.stream, bytes: concat(r.parts) }));

  /** Gives each piece of the merged stage's output the stream its bytes came from. */
  const attribute = (pieces: readonly Piece[]): LogPiece<S>[] => {
    const runs: Runs = [];
    let k = 0;
    for (const piece of pieces) {
      let at = piece.at;
      while ((origin[k] as { end: number }).end <= at) k++;
      if (piece.masked) {
        addRun(runs, (origin[k] as { stream: S }).stream, piece.bytes);
        continue;
      }
      for (let off = 0; off < piece.bytes.length;) {
        const run = origin[k] as { end: number; stream: S };
        const n = Math.min(piece.bytes.length - off, run.end - at);
        addRun(runs, run.stream, piece.bytes.subarray(off, off + n));
        off += n;
        at += n;
        if (at >= run.end) k++;
      }
    }
    // Output never goes back: the runs that end before the last piece starts are done with.
    const last = pieces.at(-1);
    if (last !== undefined) origin = origin.filter((r) => r.end > last.at);
    return joined(runs);
  };

  /** What the merged stage let out, through each stream's own stage. */
  const throughStreams = (pieces: readonly Piece[], runs: Runs = []): Runs => {
    for (const run of attribute(pieces)) for (const p of stageOf(run.stream).push(run.bytes)) addRun(runs, run.stream, p.bytes);
    return runs;
  };

  return {
    push(stream: S, chunk: Uint8Array): LogPiece<S>[] {
      stageOf(stream);
      if (!open.has(stream)) throw new Error(`push after the end of ${stream}`);
      if (chunk.length === 0) return [];
      taken += chunk.length;
      const last = origin.at(-1);
      if (last?.stream === stream) last.end = taken;
      else origin.push({ end: taken, stream });
      return joined(throughStreams(merged.push(chunk)));
    },
    end(stream: S): LogPiece<S>[] {
      // The merged stage may still hold this stream's bytes: another stream may yet complete a
      // value with them. So everything is decided once every stream ended.
      if (!open.delete(stream) || open.size > 0) return [];
      const runs = throughStreams(merged.end());
      for (const s of streams) for (const p of stageOf(s).end()) addRun(runs, s, p.bytes);
      return joined(runs);
    },
    get pending(): number {
      let n = merged.pending;
      for (const core of own.values()) n += core.pending;
      return n;
    },
  };
};

/** The strings a masker hides for these values (the registration rules above), for one-shot masking. */
export { patternStrings as maskPatterns };
