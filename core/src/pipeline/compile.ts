/**
 * Compiling a pipeline (`flowsvc/pipeline/v1`) to the graph engine's document (issue 11: one
 * engine). Each job becomes one or more nodes: `steps` -> shell nodes (consecutive `run:` lines in
 * one node, in order) and one node per `uses:` step, chained; the job's LAST node has the job's id
 * (so `steps.<job>.output` is `nodes.<job>.output`); earlier ones are `<job>--step<n>`. `script` ->
 * a code node, `approval` -> an approval node, `wait_for_event` -> an event node. `needs` -> edges
 * from each needed job's last node to the job's first; `if`/`retry` go on every node of the job;
 * env and credentials are the workflow's with the job's winning. The graph is then checked by
 * core's parseGraph, and its problems are mapped back to the job's line and column.
 */
import { FlowError, problemLine } from "../errors.js";
import { GRAPH_VERSION, type GraphDocument, type GraphProblem } from "../graph/model.js";
import { findCycle, parseGraph } from "../graph/parse.js";
import { JOB_GROUP_VARIABLES, RUN_GROUP_VARIABLES, type PipelineGroup } from "./concurrency.js";
import {
  ENV_VARIABLE,
  WAIT_WHEN_VARIABLES,
  checkPipelineExpression,
  splitHoles,
  stripWrapper,
  toGraphText,
  toGraphValue,
  toGraphValueDeep,
  translateExpression,
} from "./expressions.js";
import {
  PIPELINE_LIMITS,
  PIPELINE_VERSION,
  PipelineShape,
  type PipelineConcurrency,
  type PipelineDocument,
  type PipelineJob,
  type PipelineProblem,
  type PipelineStep,
} from "./model.js";
import { parseYaml, spellPath, type ParsedYaml, type PathSegment } from "./parse.js";

/** A compiled pipeline: the graph the engine runs, and what graphs lack (concurrency, cancel_on). */
export interface CompiledPipeline {
  workflow: typeof PIPELINE_VERSION;
  name: string | undefined;
  graph: GraphDocument;
  concurrency: PipelineGroup | undefined;
  cancel_on: string[];
  /** Per job: its node ids in order (the last has the job's id) and its own concurrency group. */
  jobs: Record<string, { nodes: string[]; concurrency?: PipelineGroup }>;
}

export type CompilePipelineResult = { ok: true; pipeline: CompiledPipeline } | { ok: false; problems: PipelineProblem[] };

type RawNode = { id: string; type: string; config: Record<string, unknown>; if?: string; retry?: { attempts: number; backoff?: string } };

class Problems {
  readonly list: PipelineProblem[] = [];
  constructor(private readonly yaml: ParsedYaml) {}
  add(path: readonly PathSegment[], message: string, key = false): void {
    if (this.list.length >= PIPELINE_LIMITS.problems) return;
    const { line, column } = this.yaml.locate(path, key);
    this.list.push({ line, column, path: spellPath(path), message });
  }
  /** Runs `fn`; a FlowError it throws (a bad expression) becomes a problem at `path`. */
  guard<T>(path: readonly PathSegment[], fn: () => T): T | undefined {
    try {
      return fn();
    } catch (error) {
      if (!(error instanceof FlowError)) throw error;
      this.add(path, error.message);
      return undefined;
    }
  }
}

type Issue = { code: string; path: PropertyKey[]; message: string; input?: unknown; keys?: string[]; issues?: Array<{ message: string }> };

/** What a GitHub Actions key a pipeline does not have is written as here, said beside "unknown key". */
const ACTIONS_KEYS: Readonly<Record<string, string>> = {
  on: "a pipeline runs when submitted (flow submit), or on an event through a handler: flow handler set <name> <file> --as yaml --on <type>",
  "runs-on": "choose agents with requires: <capability>",
  "timeout-minutes": "write timeout: <duration>, e.g. 30m",
  strategy: "there is no matrix: write one job per combination",
  "continue-on-error": "a failed job cancels the jobs that need it; there is no continue-on-error",
  permissions: "a job gets the credentials its credentials: map names, nothing else",
};

const unknownKey = (key: string): string =>
  `unknown key ${JSON.stringify(key)}${Object.hasOwn(ACTIONS_KEYS, key) ? ` (${ACTIONS_KEYS[key]})` : ""}`;

const shapeProblems = (issues: readonly Issue[], problems: Problems): void => {
  for (const issue of issues) {
    const path = issue.path.filter((s): s is string | number => typeof s !== "symbol");
    if (issue.code === "unrecognized_keys" && issue.keys) for (const key of issue.keys) problems.add([...path, key], unknownKey(key), true);
    else if (issue.code === "invalid_type" && issue.input === undefined) problems.add(path, "required");
    else if (issue.code === "invalid_key") problems.add(path, `the name ${issue.issues?.[0]?.message ?? issue.message}`, true);
    else problems.add(path, issue.message);
  }
};

const needsOf = (job: PipelineJob): string[] => (job.needs === undefined ? [] : typeof job.needs === "string" ? [job.needs] : job.needs);

/** Unknown jobs in `needs`, then a cycle (reported at the `needs` of the first job on it). */
const checkNeeds = (jobs: Record<string, PipelineJob>, problems: Problems): void => {
  const ids = Object.keys(jobs);
  const edges: Array<{ from: string; to: string }> = [];
  for (const [id, job] of Object.entries(jobs)) {
    needsOf(job).forEach((need, i) => {
      const at: PathSegment[] = typeof job.needs === "string" ? ["jobs", id, "needs"] : ["jobs", id, "needs", i];
      if (!(need in jobs)) problems.add(at, `no job is named ${JSON.stringify(need)} (jobs: ${ids.join(", ")})`);
      else if (need === id) problems.add(at, "a job cannot need itself");
      else edges.push({ from: need, to: id });
    });
  }
  const cycle = findCycle(ids, edges);
  if (cycle) problems.add(["jobs", cycle[0]!, "needs"], `needs make a cycle: ${cycle.join(" -> ")}`);
};

interface JobContext {
  id: string;
  job: PipelineJob;
  doc: PipelineDocument;
  problems: Problems;
  env: Record<string, string>;
}

const at = (c: JobContext, ...rest: PathSegment[]): PathSegment[] => ["jobs", c.id, ...rest];

/** env values as text (toGraphText); literal ones are what `env` reads in expressions. */
const jobEnv = (c: JobContext): Record<string, unknown> => {
  const merged = { ...c.doc.env, ...c.job.env };
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(merged)) {
    const where = c.job.env?.[k] !== undefined ? at(c, "env", k) : ["env", k];
    out[k] = c.problems.guard(where, () => toGraphText(v, c.env)) ?? v;
  }
  return out;
};

/** What every shell/code node of a job takes: env, credentials (job wins), requires, timeout. */
const jobConfig = (c: JobContext): Record<string, unknown> => {
  const config: Record<string, unknown> = {};
  const env = jobEnv(c);
  if (Object.keys(env).length > 0) config["env"] = env;
  const credentials = { ...c.doc.credentials, ...c.job.credentials };
  if (Object.keys(credentials).length > 0) config["credentials"] = credentials;
  if (c.job.requires !== undefined) config["requires"] = c.job.requires;
  if (c.job.timeout !== undefined) config["timeout"] = c.job.timeout;
  return config;
};

/** A node's body, where in the YAML it comes from, and where its config's keys are written (a `uses:` step's `with:`, an approval's map). */
type Body = Omit<RawNode, "id"> & { from?: PathSegment[]; configAt?: PathSegment[] };

const stepsNodes = (c: JobContext, steps: PipelineStep[]): Body[] => {
  const out: Body[] = [];
  let lines: string[] = [];
  const flush = (): void => {
    if (lines.length === 0) return;
    const command = c.problems.guard(at(c, "steps"), () => toGraphText(lines.join("\n"), c.env));
    out.push({ type: "shell", config: { command: command ?? "", ...jobConfig(c) } });
    lines = [];
  };
  steps.forEach((step, i) => {
    if (step.run !== undefined) {
      if (c.problems.guard(at(c, "steps", i, "run"), () => toGraphValue(step.run!, c.env)) !== undefined) lines.push(step.run);
      return;
    }
    flush();
    const config = c.problems.guard(at(c, "steps", i, "with"), () => toGraphValueDeep(step.with ?? {}, c.env));
    out.push({
      type: step.uses!,
      config: (config ?? {}) as Record<string, unknown>,
      from: at(c, "steps", i, "uses"),
      configAt: at(c, "steps", i, "with"),
    });
  });
  flush();
  return out;
};

const scriptNode = (c: JobContext, script: NonNullable<PipelineJob["script"]>): Omit<RawNode, "id"> => {
  const s = typeof script === "string" ? { source: script } : script;
  const config: Record<string, unknown> = { ...jobConfig(c) };
  if (s.source !== undefined) config["source"] = s.source;
  if (s.interpreter !== undefined) config["interpreter"] = s.interpreter;
  return { type: "code", config };
};

const approvalNode = (c: JobContext, a: NonNullable<PipelineJob["approval"]>): Body => {
  const config: Record<string, unknown> = {
    prompt: c.problems.guard(at(c, "approval", "prompt"), () => toGraphText(a.prompt, c.env)) ?? "",
  };
  if (a.fields !== undefined) config["fields"] = a.fields;
  const timeout = a.timeout ?? c.job.timeout;
  if (timeout !== undefined) config["timeout"] = timeout;
  return { type: "approval", config, configAt: at(c, "approval") };
};

const waitNode = (c: JobContext, w: NonNullable<PipelineJob["wait_for_event"]>): Omit<RawNode, "id"> => {
  const config: Record<string, unknown> = { event: w.type };
  if (w.when !== undefined) {
    const when = c.problems.guard(at(c, "wait_for_event", "when"), () => {
      const source = stripWrapper(w.when!);
      checkPipelineExpression(source, WAIT_WHEN_VARIABLES, true);
      return source;
    });
    if (when !== undefined) config["when"] = when;
  }
  const timeout = w.timeout ?? c.job.timeout;
  if (timeout !== undefined) config["timeout"] = timeout;
  return { type: "event", config };
};

const jobBodies = (c: JobContext): Body[] => {
  const { job } = c;
  if (job.steps) return stepsNodes(c, job.steps);
  if (job.script !== undefined) return [scriptNode(c, job.script)];
  if (job.approval) return [approvalNode(c, job.approval)];
  return [waitNode(c, job.wait_for_event!)];
};

const jobIf = (c: JobContext): string | undefined => {
  const cond = c.job.if;
  if (cond === undefined) return undefined;
  if (typeof cond === "boolean") return String(cond);
  return c.problems.guard(at(c, "if"), () => {
    const source = stripWrapper(cond);
    checkPipelineExpression(source, undefined, true);
    return translateExpression(source, c.env);
  });
};

/** Literal env values (no `${{ }}`): what `env.X` reads in this job's expressions. */
const literalEnv = (doc: PipelineDocument, job: Pick<PipelineJob, "env">): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...doc.env, ...job.env })) if (!v.includes("${{")) out[k] = v;
  return out;
};

/**
 * A concurrency group's text checked as a template over what it may read (a workflow group:
 * `input` and `env`; a job's: also `steps`/`needs`), kept with the env its holes read (evaluated
 * when the name is needed: concurrency.ts).
 */
const checkGroup = (
  group: PipelineConcurrency | undefined,
  at: { path: PathSegment[]; variables: readonly string[] },
  problems: Problems,
  env: Record<string, string>,
): PipelineGroup | undefined => {
  if (!group) return undefined;
  const value = problems.guard([...at.path, "group"], () => toGraphValue(group.group, ENV_VARIABLE, at.variables));
  return value === undefined ? undefined : { group: group.group, policy: group.policy ?? "queue", env };
};

interface Built {
  nodes: RawNode[];
  edges: Array<{ from: string; to: string }>;
  /** Per node: the job's id and where in the YAML the node comes from. */
  origin: Array<{ job: string; path: PathSegment[]; configAt?: PathSegment[] }>;
  jobs: CompiledPipeline["jobs"];
}

const buildJob = (c: JobContext, built: Built): void => {
  const bodies = jobBodies(c);
  const cond = jobIf(c);
  const ids = bodies.map((_, i) => (i === bodies.length - 1 ? c.id : `${c.id}--step${i + 1}`));
  bodies.forEach(({ from, configAt, ...body }, i) => {
    const node: RawNode = { id: ids[i]!, ...body };
    if (cond !== undefined) node.if = cond;
    if (c.job.retry) node.retry = { ...c.job.retry };
    built.nodes.push(node);
    built.origin.push({ job: c.id, path: from ?? at(c), ...(configAt ? { configAt } : {}) });
    if (i > 0) built.edges.push({ from: ids[i - 1]!, to: ids[i]! });
  });
  const concurrency = checkGroup(c.job.concurrency, { path: at(c, "concurrency"), variables: JOB_GROUP_VARIABLES }, c.problems, {
    ...c.doc.env,
    ...c.job.env,
  });
  built.jobs[c.id] = concurrency ? { nodes: ids, concurrency } : { nodes: ids };
};

/** Every job's nodes, then the `needs` edges (from a needed job's last node to the job's first). */
const buildAll = (doc: PipelineDocument, problems: Problems): Built => {
  const built: Built = { nodes: [], edges: [], origin: [], jobs: {} };
  for (const [id, job] of Object.entries(doc.jobs)) buildJob({ id, job, doc, problems, env: literalEnv(doc, job) }, built);
  for (const [id, job] of Object.entries(doc.jobs)) {
    const first = built.jobs[id]!.nodes[0]!;
    for (const need of needsOf(job)) {
      const last = built.jobs[need]?.nodes.at(-1);
      if (last !== undefined && need !== id) built.edges.push({ from: last, to: first });
    }
  }
  return built;
};

/** A graph path's tail (`.fields[0].type`, `["a b"]`) as segments. */
const pathSegments = (tail: string): PathSegment[] => {
  const segs: PathSegment[] = [];
  const re = /\.([^.[\]]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/g;
  for (let m = re.exec(tail); m; m = re.exec(tail)) segs.push(m[1] ?? (m[2] !== undefined ? Number(m[2]) : (JSON.parse(m[3]!) as string)));
  return segs;
};

/**
 * The graph check's problems at the YAML of the node they are about: a problem in the config of a
 * `uses:` step or an approval is put at the key the author wrote (`jobs.a.steps[0].with.url: must
 * be an http:// or https:// URL`), others at the job or step, naming the node.
 */
const addGraphProblems = (graphProblems: readonly GraphProblem[], built: Built, problems: Problems): void => {
  for (const p of graphProblems) {
    const index = /^nodes\[(\d+)\]/.exec(p.path);
    const origin = index ? built.origin[Number(index[1])] : undefined;
    const node = index ? built.nodes[Number(index[1])]?.id : undefined;
    const inConfig = /^nodes\[\d+\]\.config((?:\.|\[).*)?$/.exec(p.path);
    if (origin?.configAt && inConfig) problems.add([...origin.configAt, ...pathSegments(inConfig[1] ?? "")], p.message);
    else problems.add(origin?.path ?? ["jobs"], `${p.path.replace(/^nodes\[\d+\]/, `node ${node ?? "?"}`)}: ${p.message}`);
  }
};

/** `env.X` at the top level of an expression (not `steps.env.X`). */
const ENV_READ = /(?<![\w.])env\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)/g;

/** The first env name a text's holes read that is in `holed`; a text whose holes do not split is another check's. */
const holedEnvRead = (text: string, holed: ReadonlySet<string>): string | undefined => {
  if (!text.includes("${{")) return undefined;
  let parts;
  try {
    parts = splitHoles(text);
  } catch {
    return undefined;
  }
  for (const p of parts) if ("expr" in p) for (const m of p.expr.matchAll(ENV_READ)) if (holed.has(m[1]!)) return m[1];
  return undefined;
};

/**
 * An expression reads `env.X` only when X is a literal value; X with a `${{ }}` of its own is
 * refused here, at the text that reads it (when the job ran it failed with `No such key: X`). A
 * concurrency group is not walked: it reads every env value, its holes evaluated first.
 */
const checkEnvReads = (doc: PipelineDocument, problems: Problems): void => {
  const walk = (value: unknown, path: PathSegment[], holed: ReadonlySet<string>): void => {
    if (typeof value === "string") {
      const name = holedEnvRead(value, holed);
      if (name !== undefined)
        problems.add(
          path,
          `env.${name} has a \${{ }} of its own; an expression reads only literal env values: read what ${name} reads instead`,
        );
    } else if (Array.isArray(value)) value.forEach((v, i) => walk(v, [...path, i], holed));
    else if (typeof value === "object" && value !== null)
      for (const [k, v] of Object.entries(value)) if (k !== "concurrency") walk(v, [...path, k], holed);
  };
  for (const [id, job] of Object.entries(doc.jobs)) {
    const merged: Record<string, string> = { ...doc.env, ...job.env };
    const holed = new Set(Object.keys(merged).filter((k) => merged[k]!.includes("${{")));
    if (holed.size > 0) walk(job, ["jobs", id], holed);
  }
};

/** Compiles a checked document; problems (with positions) for anything the graph check refuses. */
const compileDocument = (doc: PipelineDocument, yaml: ParsedYaml): CompilePipelineResult => {
  const problems = new Problems(yaml);
  checkNeeds(doc.jobs, problems);
  checkEnvReads(doc, problems);
  for (const [k, v] of Object.entries(doc.env ?? {})) if (v.includes("${{")) problems.guard(["env", k], () => splitHoles(v));
  const built = buildAll(doc, problems);
  const concurrency = checkGroup(doc.concurrency, { path: ["concurrency"], variables: RUN_GROUP_VARIABLES }, problems, { ...doc.env });
  if (problems.list.length > 0) return { ok: false, problems: problems.list };
  const checked = parseGraph({ version: GRAPH_VERSION, nodes: built.nodes, edges: built.edges });
  if (!checked.ok) {
    addGraphProblems(checked.problems, built, problems);
    return { ok: false, problems: problems.list };
  }
  const pipeline: CompiledPipeline = {
    workflow: PIPELINE_VERSION,
    name: doc.name,
    graph: checked.graph,
    concurrency,
    cancel_on: doc.cancel_on ?? [],
    jobs: built.jobs,
  };
  return { ok: true, pipeline };
};

/** YAML text to a compiled pipeline, or every problem with its line and column. Never throws. */
export const compilePipeline = (text: string): CompilePipelineResult => {
  const parsed = parseYaml(text);
  if (!parsed.ok) return parsed;
  const { yaml } = parsed;
  const problems = new Problems(yaml);
  const shape = PipelineShape.safeParse(yaml.value, { reportInput: true });
  if (!shape.success) {
    shapeProblems(shape.error.issues, problems);
    return { ok: false, problems: problems.list };
  }
  return compileDocument(shape.data, yaml);
};

/** A problem as one line: `line 3, column 5: jobs.build.needs[0]: no job is named "x"`. */
export const formatPipelineProblem = (p: PipelineProblem): string => problemLine(p);

/** The error for a refused pipeline: invalid_argument, one problem per line, problems in details. */
export const pipelineError = (problems: readonly PipelineProblem[]): FlowError =>
  new FlowError("invalid_argument", problems.map(formatPipelineProblem).join("\n"), {
    details: { problems: problems.map((p) => ({ ...p })) },
  });

/** Throws pipelineError when refused. */
export const assertPipeline = (text: string): CompiledPipeline => {
  const r = compilePipeline(text);
  if (!r.ok) throw pipelineError(r.problems);
  return r.pipeline;
};
