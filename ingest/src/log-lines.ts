import type { Pool } from "pg";
import { prefixJobChunk } from "@flowsvc/core/pipeline";
import { readLogShapes, readLogs, type LogRowShape } from "@flowsvc/store";

/** A window of a run's log by line: the text `GET runs/:id/log` streams, split at line feeds. */
export interface LogLines {
  /** The 1-based number of the first line of `lines`. */
  from: number;
  lines: string[];
  /** Lines in the log so far, its unfinished last line included. */
  total: number;
  /** The last of `lines` is the log's last line, still without its line feed. */
  partial: boolean;
}

/** A line past `max` characters: its first `max` (not splitting a surrogate pair) and how many more it had. */
export const cutLine = (line: string, max: number): string => {
  if (line.length <= max) return line;
  const keep = /[\ud800-\udbff]/.test(line[max - 1] ?? "") ? max - 1 : max;
  return `${line.slice(0, keep)} … [${line.length - keep} more characters]`;
};

/** Rows of shapes read per query while an index catches up. */
const SHAPE_BATCH = 50_000;

/**
 * Where each line of one run's log starts, from the rows' shapes (ids, line feed counts, jobs; not
 * their text): a window of lines reads only the rows that hold it. Rows are appended in id order
 * and never change, so the index only grows, by the rows after the last one it has.
 */
export class RunLineIndex {
  /** Each shape's first row id (a shape is one row of a pipeline run, else up to 32 consecutive rows). */
  readonly #ids: number[] = [];
  /** Rows in each shape. */
  readonly #rows: number[] = [];
  /** Line feeds before each shape. */
  readonly #before: number[] = [];
  /** Whether each row starts at a line start of its job: the prefixer's state there (a pipeline run's `[job] `). */
  readonly #atStart: boolean[] = [];
  readonly #jobAtStart = new Map<string, boolean>();
  #newlines = 0;
  #partial = false;
  #lastId = 0;
  #chain: Promise<void> = Promise.resolve();

  constructor(readonly runId: string) {}

  /** Lines so far, the unfinished last one included. */
  get total(): number {
    return this.#newlines + (this.#partial ? 1 : 0);
  }

  /** Reads the rows appended since the last refresh; one refresh at a time. */
  refresh(pool: Pool): Promise<void> {
    const next = this.#chain.then(() => this.#read(pool));
    this.#chain = next.catch(() => undefined);
    return next;
  }

  async #read(pool: Pool): Promise<void> {
    for (;;) {
      const shapes = await readLogShapes(pool, this.runId, this.#lastId, SHAPE_BATCH);
      let rows = 0;
      for (const s of shapes) {
        this.#add(s);
        rows += s.rows;
      }
      if (rows < SHAPE_BATCH) return;
    }
  }

  #add(s: LogRowShape): void {
    this.#ids.push(s.id);
    this.#rows.push(s.rows);
    this.#before.push(this.#newlines);
    this.#atStart.push(s.job === null || this.#jobAtStart.get(s.job) !== false);
    if (!s.empty) {
      if (s.job !== null) this.#jobAtStart.set(s.job, s.endsLine);
      this.#partial = !s.endsLine;
    }
    this.#newlines += s.newlines;
    this.#lastId = s.lastId;
  }

  /** The shape in which the 0-based line `line` starts: the one holding line feed number `line`. */
  #rowOf(line: number): number {
    if (line === 0) return 0;
    // The last shape with fewer than `line` line feeds before it.
    let lo = 0;
    let hi = this.#ids.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.#before[mid]! < line) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /**
   * Lines `from` (1-based) to `from + limit - 1`, as far as the log goes; reads only the rows that
   * hold them. With `lineMax`, a longer line keeps its first `lineMax` characters and says how many
   * more it had (a reader that bounds what it holds).
   */
  async window(pool: Pool, from: number, limit: number, lineMax?: number): Promise<LogLines> {
    const total = this.total;
    const start = from - 1;
    const end = Math.min(total, start + limit);
    if (start >= end) return { from, lines: [], total, partial: false };
    const first = this.#rowOf(start);
    const last = end > this.#newlines ? this.#ids.length - 1 : this.#rowOf(end);
    // Each row with its shape's prefixer state (a shape of several rows has no job: no prefix).
    const atStart: boolean[] = [];
    for (let b = first; b <= last; b++) for (let k = 0; k < this.#rows[b]!; k++) atStart.push(this.#atStart[b]!);
    const rows = await readLogs(pool, this.runId, this.#ids[first]! - 1, atStart.length);
    const text = rows.map((r, k) => prefixJobChunk(r.job, r.data, atStart[k] ?? true)).join("");
    let pos = 0;
    for (let skip = start - this.#before[first]!; skip > 0; skip--) pos = text.indexOf("\n", pos) + 1;
    const lines = text.slice(pos).split("\n", end - start);
    return {
      from,
      lines: lineMax === undefined ? lines : lines.map((l) => cutLine(l, lineMax)),
      total,
      partial: end === total && this.#partial,
    };
  }

  /** The last `count` lines. */
  tail(pool: Pool, count: number, lineMax?: number): Promise<LogLines> {
    return this.window(pool, Math.max(1, this.total - count + 1), count, lineMax);
  }
}

/**
 * The line indexes of the runs whose logs were read by line lately, per process (the API's line
 * windows and the console's live stream share them); the least recently used go beyond `max`.
 */
export class LogLineIndexes {
  readonly #runs = new Map<string, RunLineIndex>();

  constructor(
    readonly pool: Pool,
    readonly max = 16,
  ) {}

  /** The run's index, caught up with its log. */
  async of(runId: string): Promise<RunLineIndex> {
    let index = this.#runs.get(runId);
    if (index) this.#runs.delete(runId);
    else index = new RunLineIndex(runId);
    this.#runs.set(runId, index);
    for (const old of this.#runs.keys()) {
      if (this.#runs.size <= this.max) break;
      this.#runs.delete(old);
    }
    await index.refresh(this.pool);
    return index;
  }
}
