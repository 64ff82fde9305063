/**
 * `flow follow` of a pipeline run: every line prefixed by its job (`[build] ...`). Chunks of one job
 * may split a line; the prefix goes only where a line of that job starts. Pure; one per stream.
 */
export class JobLinePrefixer {
  /** Per job: whether its next byte starts a line. */
  readonly #atLineStart = new Map<string, boolean>();

  /** The chunk as written to the stream: unchanged without a job, else each line start prefixed. */
  write(job: string | null, data: string): string {
    if (job === null || data.length === 0) return data;
    const out = prefixJobChunk(job, data, this.#atLineStart.get(job) !== false);
    this.#atLineStart.set(job, data.endsWith("\n"));
    return out;
  }
}

/**
 * One chunk of `job` as the prefixer writes it, given whether the job's previous chunk ended a line
 * (true for its first): the one rule, for a reader that starts mid-log (the console's line windows).
 */
export const prefixJobChunk = (job: string | null, data: string, atLineStart: boolean): string => {
  if (job === null || data.length === 0) return data;
  const prefix = `[${job}] `;
  const lines = data.split("\n");
  return (atLineStart ? prefix : "") + lines.map((line, i) => (i === 0 || line.length === 0 ? line : prefix + line)).join("\n");
};
