/**
 * YAML text to a plain value with the line and column of every node (yaml's `parseDocument` with a
 * LineCounter). Hostile text is refused before or while building (SECURITY.md "Expressions and
 * input"): over the size limit, bracket nesting or indentation past the limit (checked on the text:
 * the parser recurses and slows down badly on deep input), more alias expansions than the limit (an
 * alias bomb), and values Postgres cannot store or JSON cannot carry (NUL, lone surrogates, 1e400,
 * binary and other tagged values).
 */
import { LineCounter, isAlias, isMap, isPair, isScalar, isSeq, parseDocument, type Document, type Node } from "yaml";
import { findJsonProblem } from "../json-guard.js";
import { PIPELINE_LIMITS, type PipelineProblem } from "./model.js";

export type PathSegment = string | number;

export interface ParsedYaml {
  value: unknown;
  /** Line and column of the node at `path` (of its key when `key`), or of its nearest ancestor that exists. */
  locate(path: readonly PathSegment[], key?: boolean): { line: number; column: number };
}

export type ParseYamlResult = { ok: true; yaml: ParsedYaml } | { ok: false; problems: PipelineProblem[] };

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A value's path as text: `jobs.build.steps[2].run`, `env["A B"]`. */
export const spellPath = (path: readonly PathSegment[]): string => {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (IDENT.test(seg) || /^[A-Za-z_][A-Za-z0-9_-]*$/.test(seg)) out += out === "" ? seg : `.${seg}`;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out === "" ? "(document)" : out;
};

/** Spaces at the start of the line that starts at `i`. */
const indentAt = (text: string, i: number): number => {
  let k = i;
  while (text[k] === " ") k++;
  return k - i;
};

/** Bracket depth after character `c`; quoted text is skipped by the caller. */
const depthAfter = (c: string, depth: number): number =>
  c === "[" || c === "{" ? depth + 1 : c === "]" || c === "}" ? Math.max(0, depth - 1) : depth;

/** Whether a `"` at `i` opens a double-quoted scalar (at a line start or after a blank or flow indicator). */
const opensQuote = (text: string, i: number, lineStart: number): boolean =>
  text[i] === '"' && (i === lineStart || /[\s:[{,]/.test(text[i - 1]!));

/** The first place the text nests brackets or indents past the limits, as a character offset and why. */
const textShapeProblem = (text: string): { offset: number; message: string } | undefined => {
  let depth = 0;
  let inQuote = false;
  for (let i = 0, lineStart = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\n") {
      lineStart = i + 1;
      inQuote = false;
    } else if (i === lineStart && indentAt(text, i) > PIPELINE_LIMITS.indentColumns)
      return { offset: i, message: `the line is indented more than ${PIPELINE_LIMITS.indentColumns} columns` };
    else if (inQuote) inQuote = c !== '"';
    else if (opensQuote(text, i, lineStart)) inQuote = true;
    else if ((depth = depthAfter(c, depth)) > PIPELINE_LIMITS.flowDepth)
      return { offset: i, message: `brackets nest more than ${PIPELINE_LIMITS.flowDepth} deep` };
  }
  return undefined;
};

/** One step down: the child node at `seg` and, in a map, its key node. */
const childOf = (doc: Document, parent: unknown, seg: PathSegment): { next: unknown; key: unknown } => {
  const node = isAlias(parent) ? parent.resolve(doc) : parent;
  if (isMap(node)) {
    const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(seg));
    return { next: pair?.value, key: pair?.key };
  }
  if (isSeq(node) && typeof seg === "number") return { next: node.items[seg], key: undefined };
  return { next: undefined, key: undefined };
};

/** The start offset of the node at `path` (its key's when `key`), or of its nearest found ancestor. */
const rangeAt = (doc: Document, path: readonly PathSegment[], key: boolean): number => {
  let node: unknown = doc.contents;
  let at = (node as Node | null)?.range?.[0] ?? 0;
  for (let i = 0; i < path.length; i++) {
    const step = childOf(doc, node, path[i]!);
    const chosen = (i === path.length - 1 && key ? step.key : step.next) ?? step.key;
    const start = (chosen as Node | undefined)?.range?.[0];
    if (start === undefined) break;
    at = start;
    node = step.next;
  }
  return at;
};

const problemAt = (lc: LineCounter, offset: number, path: string, message: string): PipelineProblem => {
  const { line, col } = lc.linePos(offset);
  return { line, column: col, path, message };
};

/** Where a built value holds something JSON cannot carry (a Buffer from `!!binary`, a Map, a Date). */
const nonJsonPath = (value: unknown, path: PathSegment[] = []): PathSegment[] | undefined => {
  if (value === null || ["string", "number", "boolean"].includes(typeof value)) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = nonJsonPath(value[i], [...path, i]);
      if (p) return p;
    }
    return undefined;
  }
  if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    for (const [k, v] of Object.entries(value)) {
      const p = nonJsonPath(v, [...path, k]);
      if (p) return p;
    }
    return undefined;
  }
  return path;
};

/** json-guard's path (`(document).jobs.a[2]`) back to segments, for the position. */
const guardSegments = (path: string): PathSegment[] => {
  const segs: PathSegment[] = [];
  const re = /\.([A-Za-z_$][A-Za-z0-9_$]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/g;
  for (let m = re.exec(path); m; m = re.exec(path)) segs.push(m[1] ?? (m[2] !== undefined ? Number(m[2]) : (JSON.parse(m[3]!) as string)));
  return segs;
};

const buildValue = (doc: Document, lc: LineCounter, locate: ParsedYaml["locate"]): ParseYamlResult => {
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: PIPELINE_LIMITS.aliases });
  } catch (error) {
    const message = (error as Error).message.startsWith("Excessive alias count")
      ? `the aliases (*name) expand more than ${PIPELINE_LIMITS.aliases} times; refused as a resource exhaustion attack`
      : (error as Error).message;
    return { ok: false, problems: [problemAt(lc, 0, "(document)", message)] };
  }
  const guard = findJsonProblem(value, "(document)", PIPELINE_LIMITS.depth);
  if (guard) {
    const segs = guardSegments(guard.path.replace(/^\(document\)/, ""));
    const message = guard.kind === "depth" ? `is nested more than ${PIPELINE_LIMITS.depth} levels deep` : guard.problem;
    const { line, column } = locate(segs);
    return { ok: false, problems: [{ line, column, path: spellPath(segs), message }] };
  }
  const odd = nonJsonPath(value);
  if (odd) {
    const { line, column } = locate(odd);
    return {
      ok: false,
      problems: [
        {
          line,
          column,
          path: spellPath(odd),
          message: "is not a string, number, boolean, null, list or map (a YAML tag such as !!binary)",
        },
      ],
    };
  }
  return { ok: true, yaml: { value, locate } };
};

/** Parses one YAML document, keeping positions. Never throws. */
export const parseYaml = (text: string): ParseYamlResult => {
  const lc = new LineCounter();
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > PIPELINE_LIMITS.textBytes)
    return {
      ok: false,
      problems: [
        {
          line: 1,
          column: 1,
          path: "(document)",
          message: `the document is ${bytes} bytes; the limit is ${PIPELINE_LIMITS.textBytes} (1 MiB)`,
        },
      ],
    };
  const shape = textShapeProblem(text);
  if (shape) {
    lc.addNewLine(0);
    for (let i = text.indexOf("\n"); i !== -1 && i < shape.offset; i = text.indexOf("\n", i + 1)) lc.addNewLine(i + 1);
    return { ok: false, problems: [problemAt(lc, shape.offset, "(document)", shape.message)] };
  }
  const doc = parseDocument(text, { keepSourceTokens: true, lineCounter: lc, uniqueKeys: true, prettyErrors: false, version: "1.2" });
  const errors = [...doc.errors];
  if (errors.length > 0)
    return {
      ok: false,
      problems: errors.slice(0, PIPELINE_LIMITS.problems).map((e) => problemAt(lc, e.pos[0], "(document)", e.message.split("\n")[0]!)),
    };
  const locate: ParsedYaml["locate"] = (path, key = false) => {
    const { line, col } = lc.linePos(rangeAt(doc, path, key));
    return { line, column: col };
  };
  return buildValue(doc, lc, locate);
};
