/**
 * Concurrency groups of a pipeline (spec, "Events": `group` accepts `${{ }}` holes; `policy: queue |
 * cancel-running`), at workflow level and at job level. The group is a text with holes over `input`
 * and `env` (and, for a job's group, `steps`/`needs`: the jobs it needs have ended when it starts).
 * `env` is the pipeline's env (the job's merged over the workflow's), each value's own holes
 * evaluated first. The name is worked out once per run (a workflow group, at the run's creation)
 * or per job (when the job is ready to start), through the one CEL wrapper.
 */
import { FlowError } from "../errors.js";
import { evaluateConfig } from "../graph/expressions.js";
import type { GraphScope } from "../graph/model.js";
import { textProblem } from "../json-guard.js";
import { ENV_VARIABLE, PIPELINE_VARIABLES, toGraphValue } from "./expressions.js";
import type { ConcurrencyPolicy } from "./model.js";

/** A group as compiled: the text with its holes, the policy, and the env its holes read. */
export interface PipelineGroup {
  group: string;
  policy: ConcurrencyPolicy;
  env: Record<string, string>;
}

/** What a workflow-level group may read: nothing has run yet. */
export const RUN_GROUP_VARIABLES: readonly string[] = ["input", "env"];
/** What a job-level group may read: also the jobs before it. */
export const JOB_GROUP_VARIABLES: readonly string[] = PIPELINE_VARIABLES;

/** Longest group name, in characters (the YAML text of the group has the same cap). */
export const GROUP_NAME_LIMIT = 256;

/** The env a group reads: literal values as written, and each value with holes evaluated over the scope (one that fails is left out). */
const evaluatedEnv = (env: Readonly<Record<string, string>>, scope: GraphScope): Record<string, string> => {
  const literal: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (!v.includes("${{")) literal[k] = v;
  const out: Record<string, string> = { ...literal };
  for (const [k, v] of Object.entries(env)) {
    if (!v.includes("${{")) continue;
    try {
      const r = evaluateConfig(toGraphValue(v, ENV_VARIABLE), scope, { env: literal });
      if (r.ok) out[k] = typeof r.value === "string" ? r.value : JSON.stringify(r.value);
    } catch (error) {
      if (!(error instanceof FlowError)) throw error;
    }
  }
  return out;
};

/** A value out of the group's expression as a name: text, or a finite number or bool as its text. */
const asName = (value: unknown): string | undefined => {
  if (typeof value === "string") return value;
  if (typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value))) return String(value);
  return undefined;
};

const refuse = (field: string, message: string): FlowError =>
  new FlowError("invalid_argument", `${field}: ${message}`, { details: { field } });

/**
 * The group's name for this run (or job): its holes evaluated over `scope` (`input`, `nodes`) and
 * the evaluated env. Refused (invalid_argument, naming `field`) when an expression fails, or the
 * name is empty, over GROUP_NAME_LIMIT characters, or not storable text (NUL, a lone surrogate).
 */
export const concurrencyGroupName = (
  g: Pick<PipelineGroup, "group" | "env">,
  scope: GraphScope,
  opts: { field?: string; variables?: readonly string[] } = {},
): string => {
  const field = opts.field ?? "concurrency.group";
  let value: unknown;
  try {
    value = toGraphValue(g.group, ENV_VARIABLE, opts.variables ?? JOB_GROUP_VARIABLES);
  } catch (error) {
    if (error instanceof FlowError) throw refuse(field, error.message);
    throw error;
  }
  const r = evaluateConfig(value, scope, { env: evaluatedEnv(g.env, scope) });
  if (!r.ok) throw refuse(field, r.error.replace(/^config: /, ""));
  return checkedName(field, r.value);
};

/** The evaluated group as a name: text (or a finite number or bool), 1-GROUP_NAME_LIMIT characters, storable. */
const checkedName = (field: string, value: unknown): string => {
  const name = asName(value);
  if (name === undefined) throw refuse(field, `the group evaluates to ${value === null ? "null" : typeof value}: a group name is text`);
  if (name.length === 0 || name.length > GROUP_NAME_LIMIT) {
    const shown = `${JSON.stringify(name.slice(0, 40))}${name.length > 40 ? "..." : ""}`;
    throw refuse(field, `the group evaluates to ${name.length} characters (${shown}): give 1-${GROUP_NAME_LIMIT}`);
  }
  const problem = textProblem(name);
  if (problem !== undefined) throw refuse(field, `the group name ${problem}`);
  return name;
};

/** A job's group as a pipeline run keeps it (`runs.job_groups`): the job, its node ids in order (the first takes the lease, the last ending lets it go). */
export interface JobGroup extends PipelineGroup {
  job: string;
  nodes: string[];
}

/** The jobs that declare a group, in document order. */
export const jobGroupsOf = (jobs: Readonly<Record<string, { nodes: string[]; concurrency?: PipelineGroup }>>): JobGroup[] =>
  Object.entries(jobs).flatMap(([job, j]) => (j.concurrency ? [{ job, nodes: j.nodes, ...j.concurrency }] : []));

/** A run's place in its workflow-level group: the group's name for this run and whether it cancels the group's other runs. */
export interface RunGroup {
  name: string;
  cancelRunning: boolean;
}

/** The workflow-level group of a pipeline run with this input (undefined: none); refused as concurrencyGroupName refuses. */
export const runGroupOf = (pipeline: { concurrency: PipelineGroup | undefined }, input: unknown): RunGroup | undefined => {
  const c = pipeline.concurrency;
  if (!c) return undefined;
  const name = concurrencyGroupName(c, { input: input ?? {}, nodes: {} }, { variables: RUN_GROUP_VARIABLES });
  return { name, cancelRunning: c.policy === "cancel-running" };
};
