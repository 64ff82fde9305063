import { FlowError } from "./errors.js";

/**
 * Durations as the spec writes them (Limits, "Duration format": humantime, e.g. `5s`, `1m`, `2h`,
 * `30d`), following the grammar of the Rust `humantime` crate's `parse_duration`:
 *
 * - one or more terms, each a non-negative integer and a unit, joined with or without spaces
 *   (`1h30m`, `1h 30m`, `2 hours 1 min`); space between number and unit is allowed (`5 s`);
 * - units are case-sensitive (`m` is minutes, `M` is months):
 *   ns nsec nanos | us usec µs | ms msec millis | s sec secs second seconds |
 *   m min mins minute minutes | h hr hrs hour hours | d day days | w week weeks |
 *   M month months (30.44 days) | y year years (365.25 days);
 * - `0s` is valid; there are no signs and no fractions (`-1s`, `1.5h` are refused).
 *
 * One deliberate difference: humantime skips spaces inside a number (`1 0s` is 10 s); that is
 * refused here, as it is surely a typo.
 *
 * The result is whole milliseconds. A total with a sub-millisecond part is rounded UP (`1ns` and
 * `500us` are 1 ms, `1500us` is 2 ms): a sleep or timeout is never shorter than asked, and a
 * non-zero duration never becomes 0, which callers may read as "no wait".
 */

const NS_PER_UNIT: ReadonlyMap<string, bigint> = (() => {
  const ms = 1_000_000n;
  const s = 1000n * ms;
  const day = 86_400n * s;
  const table: Array<[string[], bigint]> = [
    [["ns", "nsec", "nanos"], 1n],
    [["us", "usec", "µs"], 1000n],
    [["ms", "msec", "millis"], ms],
    [["s", "sec", "secs", "second", "seconds"], s],
    [["m", "min", "mins", "minute", "minutes"], 60n * s],
    [["h", "hr", "hrs", "hour", "hours"], 3600n * s],
    [["d", "day", "days"], day],
    [["w", "week", "weeks"], 7n * day],
    [["M", "month", "months"], 2_630_016n * s], // 30.44 days, as humantime
    [["y", "year", "years"], 31_557_600n * s], // 365.25 days, as humantime
  ];
  return new Map(table.flatMap(([names, ns]) => names.map((n): [string, bigint] => [n, ns])));
})();

const NS_PER_MS = 1_000_000n;
const MAX_MS = BigInt(Number.MAX_SAFE_INTEGER);
const EXAMPLES = "use e.g. 30s, 5m, 2h, 1d";
// One term: a number, optional space, a unit; leading space allowed. Sticky, so terms must touch.
const TERM = /\s*(\d+)\s*([A-Za-zµ]*)/y;

const invalid = (text: string, why: string): FlowError => {
  const shown = text.length > 80 ? `${text.slice(0, 80)}…` : text;
  return new FlowError("invalid_argument", `invalid duration ${JSON.stringify(shown)}: ${why}; ${EXAMPLES}`);
};

/** Why the text at `at` does not start a term. */
const whyNoTerm = (text: string, at: number): string => {
  const rest = text.slice(at).trimStart();
  const pos = text.length - rest.length;
  if (rest.startsWith("-")) return "a duration cannot be negative";
  if (rest.startsWith("+")) return `unexpected "+" at position ${pos}`;
  if (/^[.,]\d/.test(rest)) return "fractions are not supported (write 1h30m for 1.5h, 500ms for 0.5s)";
  return `expected a number at position ${pos}, found ${JSON.stringify(rest[0])}`;
};

/** Parses a humantime duration into whole milliseconds (see the module comment for the grammar). */
export const parseDuration = (text: string): number => {
  if (text.trim() === "") throw invalid(text, "it is empty");
  let totalNs = 0n;
  let at = 0;
  while (text.slice(at).trim() !== "") {
    TERM.lastIndex = at;
    const m = TERM.exec(text);
    if (!m) throw invalid(text, whyNoTerm(text, at));
    const [, digits = "", unit = ""] = m;
    const next = text[TERM.lastIndex];
    if (unit === "" && next !== undefined && /[.,]/.test(next)) throw invalid(text, whyNoTerm(text, TERM.lastIndex));
    if (unit === "") throw invalid(text, `the number ${digits} has no unit (write ${digits}s, ${digits}m, ...)`);
    const perUnit = NS_PER_UNIT.get(unit);
    if (perUnit === undefined) {
      throw invalid(text, `unknown unit ${JSON.stringify(unit)} (units: ns, us, ms, s, m, h, d, w, M for months, y)`);
    }
    totalNs += BigInt(digits) * perUnit;
    at = TERM.lastIndex;
  }
  const ms = (totalNs + NS_PER_MS - 1n) / NS_PER_MS;
  if (ms > MAX_MS) throw invalid(text, "it is too large");
  return Number(ms);
};

const FORMAT_UNITS: ReadonlyArray<[string, number]> = [
  ["d", 86_400_000],
  ["h", 3_600_000],
  ["m", 60_000],
  ["s", 1000],
  ["ms", 1],
];

/**
 * Formats milliseconds compactly, largest unit first, days at most: `1h30m`, `250ms`, `2d3h`,
 * `0s`. parseDuration reads the result back to the same number. A fractional millisecond is
 * rounded up, as parseDuration does.
 */
export const formatDuration = (ms: number): string => {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new FlowError("invalid_argument", `cannot format ${ms} as a duration: expected a finite number of milliseconds, 0 or more`);
  }
  let rest = Math.ceil(ms);
  if (rest === 0) return "0s";
  let out = "";
  for (const [unit, size] of FORMAT_UNITS) {
    const n = Math.floor(rest / size);
    if (n > 0) out += `${n}${unit}`;
    rest -= n * size;
  }
  return out;
};
