/**
 * Checking a graph document (spec, "Graph document shape"; graph contract, "core (A)"). parseGraph
 * never throws: it returns the graph, or every problem it found (at most GRAPH_LIMITS.problems),
 * each with the path of the value at fault (`nodes[3].config.url: required`).
 *
 * Order: storable JSON (NUL, lone surrogates, 1e400, nesting; core's json-guard), then the shape
 * (zod), then what needs the whole document: unique ids, edges naming known nodes, no self-edge
 * and no cycle, each node's config against its type (node-configs.ts), and every expression
 * compiling through core's CEL wrapper.
 */
import { celPosition } from "../cel.js";
import type { z } from "zod";
import { FlowError, problemLine } from "../errors.js";
import { findJsonProblem } from "../json-guard.js";
import { parseDuration } from "../duration.js";
import {
  GRAPH_VARIABLES,
  asConfigExpression,
  compileGraphExpression,
  expressionProblem,
  configExpressionProblem,
  referencedNodeIds,
  templateParts,
} from "./expressions.js";
import {
  DEFAULT_RETRY_BACKOFF_MS,
  GRAPH_VERSION,
  GRAPH_LIMITS,
  GraphEdgesShape,
  GraphNodeShape,
  GraphTopShape,
  type GraphDocument,
  type GraphEdge,
  type GraphNode,
  type GraphParseResult,
  type GraphProblem,
} from "./model.js";
import { checkNodeConfig, type NodeConfigContext } from "./node-configs.js";

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A path from zod's segments: `nodes[3].config.url`, `config["a b"]`. */
export const formatPath = (segments: ReadonlyArray<PropertyKey>): string => {
  let out = "";
  for (const seg of segments) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (typeof seg === "string" && IDENT.test(seg)) out += out === "" ? seg : `.${seg}`;
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out === "" ? "(document)" : out;
};

/** Problems, capped: past the cap one last problem says how many more there were. */
class Problems {
  readonly list: GraphProblem[] = [];
  private dropped = 0;
  add(path: string, message: string): void {
    if (this.list.length < GRAPH_LIMITS.problems) this.list.push({ path, message });
    else this.dropped++;
  }
  done(): GraphProblem[] {
    return this.dropped === 0 ? this.list : [...this.list, { path: "(document)", message: `${this.dropped} more problems not shown` }];
  }
}

type Issue = { code: string; path: PropertyKey[]; message: string; input?: unknown; keys?: string[] };

/** zod's issue as a problem: a missing value is `required`, an unknown key names the key. */
const issueProblem = (issue: Issue): GraphProblem => {
  if (issue.code === "unrecognized_keys" && issue.keys)
    return {
      path: formatPath(issue.path),
      message: `unknown key${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => JSON.stringify(k)).join(", ")}`,
    };
  if (issue.code === "invalid_type" && issue.input === undefined) return { path: formatPath(issue.path), message: "required" };
  return { path: formatPath(issue.path), message: issue.message };
};

export { expressionProblem };

/** For an id read with a dot that is the start of a dashed id (`nodes.deploy-prod` reads nodes.deploy minus prod): how to write it. */
const dashedHint = (unknown: string, ids: ReadonlySet<string>): string => {
  const dashed = [...ids].find((id) => id.startsWith(`${unknown}-`));
  return dashed === undefined ? "" : `; to read node "${dashed}" write nodes[${JSON.stringify(dashed)}]`;
};

/** An id the expression reads that no node has (`nodes.fecth`). */
const unknownNodeProblem = (source: string, ids: ReadonlySet<string>): string | undefined => {
  const unknown = referencedNodeIds(source).find((id) => !ids.has(id));
  if (unknown === undefined) return undefined;
  const read = /^[A-Za-z_][A-Za-z0-9_]*$/.test(unknown) ? `nodes.${unknown}` : `nodes[${JSON.stringify(unknown)}]`;
  return `no node has id ${JSON.stringify(unknown)} (read as ${read})${dashedHint(unknown, ids)}`;
};

/** Compiles, then checks the node ids read; a compile error gets the dashed-id hint too (`Unknown variable: prod`). */
const sourceProblem = (
  source: string,
  ids: ReadonlySet<string>,
  variables: readonly string[] = GRAPH_VARIABLES,
  predicate = false,
): string | undefined => {
  const compiled = expressionProblem(source, variables, predicate);
  if (compiled === undefined) return unknownNodeProblem(source, ids);
  const unknown = referencedNodeIds(source).find((id) => !ids.has(id));
  return unknown === undefined ? compiled : `${compiled}${dashedHint(unknown, ids)}`;
};

/** Problems of a `$template`: an unclosed `{{`, an empty hole, or a hole that does not compile. */
const templateProblem = (template: string, ids: ReadonlySet<string>): string | undefined => {
  let parts;
  try {
    parts = templateParts(template);
  } catch (error) {
    return (error as Error).message;
  }
  for (const part of parts) {
    if (!("expr" in part)) continue;
    try {
      compileGraphExpression(part.expr);
    } catch (error) {
      // CEL's position is within the hole: say where that is in the whole template.
      const offset = error instanceof FlowError ? error.details?.["offset"] : undefined;
      const message = (error as Error).message.replace(/ at line \d+, column \d+$/, "");
      const where =
        typeof offset === "number"
          ? ` at ${celPosition(template, part.offset + offset)}`
          : ` in the hole at ${celPosition(template, part.offset)}`;
      return `${message}${where}`;
    }
    const unknown = unknownNodeProblem(part.expr, ids);
    if (unknown !== undefined) return `${unknown} in the hole at ${celPosition(template, part.offset)}`;
  }
  return undefined;
};

/** The CEL texts a valid switch or event config holds as plain strings (compiled by node-configs.ts). */
const whenTexts = (type: string, config: Record<string, unknown>): Array<{ path: string; source: string }> => {
  if (type === "event" && typeof config["when"] === "string") return [{ path: ".when", source: config["when"] }];
  if (type !== "switch") return [];
  const cases = config["cases"] as Array<{ when: string }>;
  return cases.map((c, i) => ({ path: `.cases[${i}].when`, source: c.when }));
};

const isObject = (v: unknown): v is object => typeof v === "object" && v !== null;

/** A place in a config: the path is spelled only for a problem (a list may hold 500k objects). */
type WalkItem = { v: object; parent: WalkItem | undefined; seg: string | number };

const pathOf = (item: WalkItem): string => {
  const segs: Array<string | number> = [];
  for (let at: WalkItem | undefined = item; at; at = at.parent) segs.push(at.seg);
  const root = String(segs.pop());
  return root + formatPath(segs.reverse()).replace(/^(?![[.]|$)/, ".");
};

/** The objects among a list's or a map's values, last first (so they pop in document order): only objects can hold an expression. */
const childObjects = (item: WalkItem): WalkItem[] => {
  const out: WalkItem[] = [];
  if (Array.isArray(item.v)) {
    const list = item.v as unknown[];
    for (let i = list.length - 1; i >= 0; i--) if (isObject(list[i])) out.push({ v: list[i] as object, parent: item, seg: i });
    return out;
  }
  const record = item.v as Record<string, unknown>;
  const keys = Object.keys(record);
  for (let i = keys.length - 1; i >= 0; i--) {
    const child = record[keys[i]!];
    if (isObject(child)) out.push({ v: child, parent: item, seg: keys[i]! });
  }
  return out;
};

/** The problem of an expression object (its shape, its CEL); `done`: it is an expression (or a broken one), so the walk stops there. */
const expressionObjectProblem = (
  record: Record<string, unknown>,
  ids: ReadonlySet<string>,
): { done: boolean; suffix?: string; problem?: string } => {
  const shapeProblem = configExpressionProblem(record);
  if (shapeProblem) return { done: true, problem: shapeProblem };
  const expression = asConfigExpression(record);
  if (!expression) return { done: false };
  const p = expression.kind === "$expr" ? sourceProblem(expression.source, ids) : templateProblem(expression.source, ids);
  return { done: true, suffix: `.${expression.kind}`, ...(p === undefined ? {} : { problem: p }) };
};

/** The expressions a config holds: its `$expr`/`$template` objects (broken ones too), and how many CEL texts in all. */
interface ConfigExpressions {
  found: WalkItem[];
  /** `$expr`s, template holes and `when` texts: each is compiled when checked. */
  count: number;
}

/** The expressions an object holds directly: a template's holes, an `$expr`, a `when`. */
const expressionsIn = (record: Record<string, unknown>): number => {
  if (typeof record["$template"] === "string") return record["$template"].split("{{").length - 1;
  return typeof record["$expr"] === "string" || typeof record["when"] === "string" ? 1 : 0;
};

/** One walk of a config with its own stack (depth was checked before), compiling nothing. */
const collectExpressions = (config: Record<string, unknown>, path: string): ConfigExpressions => {
  const out: ConfigExpressions = { found: [], count: 0 };
  const stack: WalkItem[] = [{ v: config, parent: undefined, seg: path }];
  for (let item = stack.pop(); item; item = stack.pop()) {
    if (!Array.isArray(item.v)) {
      const record = item.v as Record<string, unknown>;
      out.count += expressionsIn(record);
      if ("$expr" in record || "$template" in record) {
        out.found.push(item);
        continue;
      }
    }
    for (const child of childObjects(item)) stack.push(child);
  }
  return out;
};

/** Each `$expr`/`$template` object's shape and CEL. */
const checkConfigExpressions = (found: readonly WalkItem[], ids: ReadonlySet<string>, problems: Problems): void => {
  for (const item of found) {
    const r = expressionObjectProblem(item.v as Record<string, unknown>, ids);
    if (r.problem !== undefined) problems.add(`${pathOf(item)}${r.suffix ?? ""}`, r.problem);
  }
};

/** Each cycle's ids once: Kahn's algorithm leaves the nodes on or behind a cycle; one walk names a cycle. */
export const findCycle = (ids: readonly string[], edges: readonly GraphEdge[]): string[] | undefined => {
  const out = new Map<string, string[]>(ids.map((id) => [id, []]));
  const indegree = new Map<string, number>(ids.map((id) => [id, 0]));
  for (const e of edges) {
    out.get(e.from)?.push(e.to);
    indegree.set(e.to, (indegree.get(e.to) ?? 0) + 1);
  }
  const queue = ids.filter((id) => indegree.get(id) === 0);
  for (let id = queue.pop(); id !== undefined; id = queue.pop()) {
    for (const next of out.get(id) ?? []) {
      const d = indegree.get(next)! - 1;
      indegree.set(next, d);
      if (d === 0) queue.push(next);
    }
  }
  const left = ids.filter((id) => indegree.get(id)! > 0);
  if (left.length === 0) return undefined;
  // From any node left, follow edges into nodes left until one repeats: that repeat closes a cycle.
  const leftSet = new Set(left);
  const seenAt = new Map<string, number>();
  const path: string[] = [];
  let at = left[0]!;
  while (!seenAt.has(at)) {
    seenAt.set(at, path.length);
    path.push(at);
    at = (out.get(at) ?? []).find((n) => leftSet.has(n))!;
  }
  return [...path.slice(seenAt.get(at)), at];
};

/** Duplicate ids among the nodes whose id is a string; answers those ids (an edge may name any of them). */
const checkIds = (nodes: readonly unknown[], problems: Problems): Set<string> => {
  const first = new Map<string, number>();
  nodes.forEach((n, i) => {
    const id = isObject(n) ? (n as { id?: unknown }).id : undefined;
    if (typeof id !== "string") return;
    const seen = first.get(id);
    if (seen === undefined) first.set(id, i);
    else problems.add(`nodes[${i}].id`, `duplicate id "${id}" (also nodes[${seen}])`);
  });
  return new Set(first.keys());
};

type ShapeNode = z.infer<typeof GraphNodeShape> & { index: number };

const addIssues = (issues: readonly z.core.$ZodIssue[], prefix: PropertyKey[], problems: Problems): void => {
  for (const issue of issues) {
    const p = issueProblem({ ...issue, path: [...prefix, ...issue.path] });
    problems.add(p.path, p.message);
  }
};

/**
 * The document's shape: the top level, then each node on its own, so one malformed node does not
 * hide the others' problems. Undefined when there is no node list to go on with; `edges` is
 * undefined when they are malformed (reported).
 */
const shapeOf = (
  doc: Record<string, unknown>,
  problems: Problems,
): { nodes: ShapeNode[]; edges: GraphEdge[] | undefined; ids: Set<string> } | undefined => {
  const top = GraphTopShape.safeParse(doc, { reportInput: true });
  if (!top.success) addIssues(top.error.issues, [], problems);
  const raw = isObject(doc) && Array.isArray(doc["nodes"]) ? (doc["nodes"] as unknown[]) : undefined;
  if (!raw || raw.length === 0) return undefined;
  const nodes: ShapeNode[] = [];
  raw.forEach((n, index) => {
    const r = GraphNodeShape.safeParse(n, { reportInput: true });
    if (r.success) nodes.push({ ...r.data, index });
    else addIssues(r.error.issues, ["nodes", index], problems);
  });
  const edges = GraphEdgesShape.safeParse(doc["edges"] ?? []);
  return { nodes, edges: edges.success ? edges.data : undefined, ids: checkIds(raw, problems) };
};

const checkEdges = (ids: ReadonlySet<string>, edges: readonly GraphEdge[], problems: Problems): void => {
  const seen = new Set<string>();
  edges.forEach((e, i) => {
    for (const end of ["from", "to"] as const) {
      if (!ids.has(e[end])) {
        problems.add(`edges[${i}].${end}`, `no node has id ${JSON.stringify(e[end])}`);
      }
    }
    if (e.from === e.to) {
      problems.add(`edges[${i}]`, `an edge from "${e.from}" to itself`);
    }
    const key = `${e.from}\u0000${e.to}`;
    if (seen.has(key)) problems.add(`edges[${i}]`, `duplicate edge from "${e.from}" to "${e.to}"`);
    seen.add(key);
  });
};

/** A cycle among the edges that name two known nodes (the others are reported by checkEdges). */
const checkCycle = (ids: ReadonlySet<string>, edges: readonly GraphEdge[], problems: Problems): void => {
  const cycle = findCycle(
    [...ids],
    edges.filter((e) => ids.has(e.from) && ids.has(e.to) && e.from !== e.to),
  );
  if (cycle) problems.add("edges", `the edges make a cycle: ${cycle.join(" -> ")}`);
};

const retryOf = (retry: { attempts: number; backoff?: string | undefined }, path: string, problems: Problems): GraphNode["retry"] => {
  let backoff_ms = DEFAULT_RETRY_BACKOFF_MS;
  if (retry.backoff !== undefined) {
    try {
      backoff_ms = parseDuration(retry.backoff);
    } catch (error) {
      problems.add(`${path}.backoff`, (error as Error).message);
    }
    if (backoff_ms > GRAPH_LIMITS.retryBackoffMs) problems.add(`${path}.backoff`, `at most 1h`);
  }
  return { attempts: retry.attempts, backoff_ms };
};

/** Too many nodes or edges, told before anything walks them. */
const countProblem = (doc: unknown): GraphProblem | undefined => {
  if (typeof doc !== "object" || doc === null) return undefined;
  const { nodes, edges } = doc as { nodes?: unknown; edges?: unknown };
  if (Array.isArray(nodes) && nodes.length > GRAPH_LIMITS.nodes)
    return { path: "nodes", message: `a graph has at most ${GRAPH_LIMITS.nodes} nodes; this one has ${nodes.length}` };
  if (Array.isArray(edges) && edges.length > GRAPH_LIMITS.edges)
    return { path: "edges", message: `a graph has at most ${GRAPH_LIMITS.edges} edges; this one has ${edges.length}` };
  return undefined;
};

/** A node's config against its type, then the node ids its `when` texts read. */
const checkConfig = (
  at: {
    type: string;
    config: Record<string, unknown>;
    path: string;
    ids: ReadonlySet<string>;
    options: ParseGraphOptions;
  },
  problems: Problems,
): void => {
  const { manifestOf, connectorProblems } = at.options;
  const configProblems = checkNodeConfig(at.type, at.config, { manifestOf, connectorProblems });
  for (const p of configProblems) problems.add(p.onType ? `${at.path}.type` : `${at.path}.config${p.path}`, p.message);
  if (configProblems.length > 0) return;
  for (const w of whenTexts(at.type, at.config)) {
    const p = unknownNodeProblem(w.source, at.ids);
    if (p !== undefined) problems.add(`${at.path}.config${w.path}`, p);
  }
};

/** Options of a check: the connector manifests (D's `connectorManifest`) when the caller has them. */
export interface ParseGraphOptions {
  /** A connector type's manifest; absent: dotted types are accepted unchecked. */
  manifestOf?: NodeConfigContext["manifestOf"];
  /** A connector node's whole config check (connectors.ts's `connectorConfigProblems`); absent: only its credential is checked. */
  connectorProblems?: NodeConfigContext["connectorProblems"];
}

/** Checks a parsed JSON value as a graph document. Never throws. */
export const parseGraph = (doc: unknown, options: ParseGraphOptions = {}): GraphParseResult => {
  const problems = new Problems();
  const tooMany = countProblem(doc);
  if (tooMany) return { ok: false, problems: [tooMany] };
  // The document, a node list, a node, then its config: the config's own levels start at 4.
  const stored = findJsonProblem(doc, "(document)", GRAPH_LIMITS.configDepth + 3);
  if (stored) {
    const path = stored.path.replace(/^\(document\)\.?/, "") || "(document)";
    const message =
      stored.kind === "depth" ? `is nested too deep: a node's config nests at most ${GRAPH_LIMITS.configDepth} levels` : stored.problem;
    return { ok: false, problems: [{ path: path.length > 200 ? `${path.slice(0, 200)}...` : path, message }] };
  }
  const shape = shapeOf(doc as Record<string, unknown>, problems);
  if (!shape) return { ok: false, problems: problems.done() };
  const { nodes: shapeNodes, edges, ids } = shape;
  const collected = shapeNodes.map((n) => collectExpressions(n.config ?? {}, `nodes[${n.index}].config`));
  const expressions = shapeNodes.filter((n) => n.if !== undefined).length + collected.reduce((sum, c) => sum + c.count, 0);
  if (expressions > GRAPH_LIMITS.expressions)
    return {
      ok: false,
      problems: [{ path: "nodes", message: `a graph holds at most ${GRAPH_LIMITS.expressions} expressions; this one has ${expressions}` }],
    };
  if (edges) {
    checkEdges(ids, edges, problems);
    checkCycle(ids, edges, problems);
  }
  const nodes: GraphNode[] = shapeNodes.map((n, i) => {
    const path = `nodes[${n.index}]`;
    const config = n.config ?? {};
    if (n.if !== undefined) {
      const p = sourceProblem(n.if, ids, GRAPH_VARIABLES, true);
      if (p !== undefined) problems.add(`${path}.if`, p);
    }
    checkConfigExpressions(collected[i]!.found, ids, problems);
    checkConfig({ type: n.type, config, path, ids, options }, problems);
    const node: GraphNode = { id: n.id, type: n.type, config };
    if (n.if !== undefined) node.if = n.if;
    if (n.retry) node.retry = retryOf(n.retry, `${path}.retry`, problems);
    return node;
  });
  if (problems.list.length > 0) return { ok: false, problems: problems.done() };
  const graph: GraphDocument = { version: GRAPH_VERSION, nodes, edges: (edges ?? []).map((e) => ({ from: e.from, to: e.to })) };
  return { ok: true, graph };
};

/** Line and column (both from 1) of a character offset. */
const lineColumn = (text: string, offset: number): string => {
  const before = text.slice(0, offset).split("\n");
  return `line ${before.length}, column ${before.at(-1)!.length + 1}`;
};

/** V8 (Node 20; later versions add the line and column) ends most messages with the offset. */
const JSON_POSITION = /(?: in JSON)? at position (\d+)(?: \(line \d+ column \d+\))?$/;

/** Whether JSON.parse's error on a prefix says only that the text ended early (so the prefix is a start of valid JSON). */
const endsEarly = (prefix: string): boolean => {
  try {
    JSON.parse(prefix);
    return true;
  } catch (error) {
    const message = (error as Error).message;
    const at = message.startsWith("Unexpected token") ? null : JSON_POSITION.exec(message);
    return at ? Number(at[1]) >= prefix.length : message.startsWith("Unexpected end of JSON input");
  }
};

/**
 * Where JSON.parse failed: its message's position when it gives one, else (V8's `Unexpected token`
 * names no position) the end of the longest prefix that is still a start of valid JSON, found by
 * bisection (a start of valid JSON only has starts of valid JSON before it).
 */
const jsonErrorOffset = (text: string, message: string): number => {
  const at = message.startsWith("Unexpected token") ? null : JSON_POSITION.exec(message);
  if (at) return Number(at[1]);
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (endsEarly(text.slice(0, mid))) lo = mid;
    else hi = mid - 1;
  }
  return lo;
};

/** JSON.parse's reason without its excerpt of the text (which may be long, or hold anything). */
const jsonReason = (message: string): string =>
  message
    .replace(JSON_POSITION, "")
    .replace(/, (?:\.\.\.)?".*" is not valid JSON$/s, "")
    .replace(/^Unexpected end of JSON input$/, "the text ends too early");

/** JSON text to a checked graph: text over the size limit or not JSON is a problem with where. */
export const parseGraphText = (text: string, options: ParseGraphOptions = {}): GraphParseResult => {
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > GRAPH_LIMITS.textBytes)
    return {
      ok: false,
      problems: [{ path: "(document)", message: `the document is ${bytes} bytes; the limit is ${GRAPH_LIMITS.textBytes} (1 MiB)` }],
    };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    const message = (error as Error).message;
    const where = lineColumn(text, jsonErrorOffset(text, message));
    return { ok: false, problems: [{ path: "(document)", message: `not valid JSON at ${where}: ${jsonReason(message)}` }] };
  }
  return parseGraph(doc, options);
};

/** The error for a refused document: invalid_argument, `nodes[3].config.url: required; ...`, problems in details. */
export const graphError = (problems: readonly GraphProblem[]): FlowError =>
  new FlowError("invalid_argument", problems.map(problemLine).join("; "), {
    details: { problems: problems.map((p) => ({ path: p.path, message: p.message })) },
  });

/** Throws graphError when the document is refused; returns the checked graph. */
export const assertGraph = (doc: unknown, options: ParseGraphOptions = {}): GraphDocument => {
  const r = parseGraph(doc, options);
  if (!r.ok) throw graphError(r.problems);
  return r.graph;
};

/**
 * A checked graph as JSON text that parseGraph takes again: what a run stores for the engine (which
 * parses it once more) and what is submitted on. parseGraph turns a node's `retry.backoff` into
 * `backoff_ms`, which is no document key: JSON.stringify of a checked graph with a retry was refused
 * when read back (`nodes[0].retry: unknown key "backoff_ms"`), so every pipeline job with `retry:`,
 * and a stored graph with a retry run by a handler or `flow call`, failed. The backoff is written back
 * as milliseconds (`"1000ms"`).
 */
export const graphDocumentText = (graph: GraphDocument): string =>
  JSON.stringify({
    ...graph,
    nodes: graph.nodes.map(({ retry, ...node }) =>
      retry ? { ...node, retry: { attempts: retry.attempts, backoff: `${retry.backoff_ms}ms` } } : node,
    ),
  });
