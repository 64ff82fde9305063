/**
 * Pure formatting for the CLI's output: aligned tables and key/value details for people, one JSON
 * or YAML document for scripts. Time comes in as a parameter.
 */
import { createRequire } from "node:module";
import type { stringify as Stringify } from "yaml";

/** yaml's stringify, loaded on the first `-o yaml` only: a table or JSON never pays for the yaml package. */
const yamlStringify = (value: unknown): string =>
  (createRequire(import.meta.url)("yaml") as { stringify: typeof Stringify }).stringify(value);

export const OUTPUT_FORMATS = ["json", "yaml"] as const;
export type DocumentFormat = (typeof OUTPUT_FORMATS)[number];
export type OutputFormat = DocumentFormat | "table";

export interface Column<T> {
  header: string;
  value: (row: T) => string;
}

/** One JSON document (pretty, newline-terminated) or one YAML document, fields as given. */
export const formatDocument = (value: unknown, format: DocumentFormat): string =>
  format === "json" ? `${JSON.stringify(value ?? null, null, 2)}\n` : yamlStringify(value ?? null);

/**
 * Control characters and bidirectional overrides, as visible escapes: a name, message or field a
 * server or another user chose cannot move the cursor, recolour or clear the terminal, or reorder
 * what is shown ("Trojan Source"), as kubectl learned (CVE-2021-25743). Line breaks and tabs stay.
 * Documents (-o json|yaml) are left to their own escaping; log output (`flow follow`) stays raw.
 */
// eslint-disable-next-line no-control-regex
const UNPRINTABLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export const printable = (text: string): string =>
  text.replace(UNPRINTABLE, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });

const cell = (text: string): string => printable(text.replace(/\s*\n\s*/g, " "));

/** Columns left-aligned to their widest cell, two spaces apart; the last column is not padded. */
export const formatTable = <T>(columns: ReadonlyArray<Column<T>>, rows: readonly T[]): string => {
  const grid = [columns.map((c) => c.header), ...rows.map((r) => columns.map((c) => cell(c.value(r))))];
  const widths = columns.map((_, i) => Math.max(...grid.map((line) => (line[i] ?? "").length)));
  return (
    grid
      .map((line) =>
        line
          .map((text, i) => (i === line.length - 1 ? text : text.padEnd(widths[i] ?? 0)))
          .join("  ")
          .trimEnd(),
      )
      .join("\n") + "\n"
  );
};

/** `key:  value` lines aligned on the value; a multi-line value continues indented under it. */
export const formatDetails = (pairs: ReadonlyArray<readonly [string, string]>): string => {
  const width = Math.max(...pairs.map(([k]) => k.length)) + 2;
  return (
    pairs
      .map(([key, value]) => {
        const [first = "", ...rest] = printable(value).split("\n");
        return [`${`${key}:`.padEnd(width)} ${first}`.trimEnd(), ...rest.map((l) => `${" ".repeat(width + 1)}${l}`.trimEnd())].join("\n");
      })
      .join("\n") + "\n"
  );
};

const UNITS: ReadonlyArray<readonly [number, string]> = [
  [86_400_000, "d"],
  [3_600_000, "h"],
  [60_000, "m"],
  [1_000, "s"],
];

/** A duration as its largest whole unit: `42s`, `5m`, `3h`, `2d`; under a second in `ms`. */
export const formatDuration = (ms: number): string => {
  for (const [size, unit] of UNITS) if (ms >= size) return `${Math.floor(ms / size)}${unit}`;
  return `${Math.max(0, Math.round(ms))}ms`;
};

const toMs = (time: string | null | undefined): number | undefined => {
  if (!time) return undefined;
  const ms = Date.parse(time);
  return Number.isNaN(ms) ? undefined : ms;
};

/** `5m ago` / `in 2h` relative to now; `-` when unset. */
export const formatAge = (time: string | null | undefined, now: Date): string => {
  const ms = toMs(time);
  if (ms === undefined) return time ?? "-";
  const delta = now.getTime() - ms;
  const span = (d: number): string => (d < 1000 ? "0s" : formatDuration(d));
  return delta >= 0 ? `${span(delta)} ago` : `in ${span(-delta)}`;
};

/** ISO time with the relative age beside it: `2025-01-02T03:04:05.000Z (5m ago)`; `-` when unset. */
export const formatTime = (time: string | null | undefined, now: Date): string => {
  const ms = toMs(time);
  return ms === undefined ? (time ?? "-") : `${new Date(ms).toISOString()} (${formatAge(time, now)})`;
};

/** Elapsed time between two instants (to now when the second is unset); `-` when the first is unset. */
export const formatElapsed = (from: string | null | undefined, to: string | null | undefined, now: Date): string => {
  const start = toMs(from);
  if (start === undefined) return "-";
  return formatDuration((toMs(to) ?? now.getTime()) - start);
};

/** Compact JSON for a table cell, cut to `max` characters with an ellipsis. */
export const formatJsonCell = (value: unknown, max = 60): string => {
  if (value === undefined) return "-";
  const text = JSON.stringify(value) ?? "-";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
};
