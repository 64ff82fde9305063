/**
 * The pipeline document `flowsvc/pipeline/v1` (spec, "Versioning"; issue 11): its limits and the zod
 * schema of its shape, modelled on GitHub Actions where the spec is silent. Positions (line and
 * column) are parse.ts's; the translation to a graph is compile.ts's.
 */
import { z } from "zod";
import { credentialMapProblems } from "../credentials/resolve.js";
import { DurationText } from "../duration-schema.js";
import { FlowError } from "../errors.js";
import { validateEventType } from "../events.js";
import { envMapProblems } from "../secret-rules.js";

export const PIPELINE_VERSION = "flowsvc/pipeline/v1";

/** Limits of one pipeline (README "Pipelines", "Limits"). */
export const PIPELINE_LIMITS = {
  /** Largest document text, in bytes of UTF-8. */
  textBytes: 1024 * 1024,
  /** Most alias expansions (`*a`) while building the document: an alias bomb is refused. */
  aliases: 100,
  /** Deepest bracket nesting (`[`, `{`) of the text, checked before the YAML parser sees it. */
  flowDepth: 64,
  /** Widest indentation of a line, in columns, checked before the YAML parser sees it. */
  indentColumns: 256,
  /** Deepest nesting of the built document (the root counting as 1). */
  depth: 40,
  /** Most jobs. */
  jobs: 200,
  /** Most steps in one job. */
  steps: 100,
  /** Most problems one check reports. */
  problems: 100,
} as const;

/** A job id: read in expressions as `steps.<job>` / `needs.<job>`; `--` is kept for step node ids. */
export const JOB_ID = /^[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*$/;
const JOB_ID_RULE = "must be 1-48 characters from [A-Za-z0-9_-], starting with a letter or _, with no -- and no trailing -";

export const CONCURRENCY_POLICIES = ["queue", "cancel-running"] as const;
export type ConcurrencyPolicy = (typeof CONCURRENCY_POLICIES)[number];

const duration = DurationText;

/** An event type by core's rule (1-64 of [A-Za-z0-9._-]). */
const eventType = z.string().superRefine((v, ctx) => {
  try {
    validateEventType(v);
  } catch (error) {
    if (!(error instanceof FlowError)) throw error;
    ctx.addIssue({ code: "custom", message: error.message.replace(/^(type|event_type|event): /, "") });
  }
});

/** A scalar as the YAML author wrote it: `env: {N: 3}` means the text "3". */
const scalarText = z.union([z.string(), z.number(), z.boolean()]).transform((v) => String(v));
/** `NAME: value`, each name by core's one rule for a run's environment (secret-rules.ts: `FLOW_*`, `LD_PRELOAD`, `PATH`... refused). */
const envMap = z.record(z.string(), scalarText).superRefine((env, ctx) => {
  for (const { segment, message } of envMapProblems(env)) ctx.addIssue({ code: "custom", path: [segment], message });
});

export const CREDENTIAL_EXPRESSION =
  "a credentials: value is a credential NAME, resolved when the job is claimed; a ${{ }} expression is not allowed here";

/** `ENV_VAR: credential name`, by core's rule (`LD_PRELOAD`, `FLOW_*` refused); a `${{ }}` is compile.ts's refusal. */
const credentialMap = z.record(z.string(), z.string()).superRefine((map, ctx) => {
  const plain: Record<string, string> = {};
  for (const [variable, name] of Object.entries(map)) {
    if (name.includes("${{")) ctx.addIssue({ code: "custom", message: CREDENTIAL_EXPRESSION, path: [variable] });
    else plain[variable] = name;
  }
  for (const p of credentialMapProblems(plain, "")) {
    const at = /^\.([^:]*): (.*)$/s.exec(p);
    ctx.addIssue({ code: "custom", message: at ? at[2]! : p.replace(/^: /, ""), path: at ? [at[1]!] : [] });
  }
});

export const ConcurrencyShape = z.object({ group: z.string().min(1).max(256), policy: z.enum(CONCURRENCY_POLICIES).optional() }).strict();
export type PipelineConcurrency = z.infer<typeof ConcurrencyShape>;

const StepShape = z
  .object({
    name: z.string().max(256).optional(),
    run: z.string().optional(),
    uses: z.string().min(1).max(128).optional(),
    with: z.record(z.string(), z.unknown()).optional(),
  })
  .strict()
  .superRefine((s, ctx) => {
    if ((s.run === undefined) === (s.uses === undefined))
      ctx.addIssue({ code: "custom", message: "a step has exactly one of run (a shell line) or uses (a node kind)" });
    if (s.with !== undefined && s.uses === undefined)
      ctx.addIssue({ code: "custom", message: "with: belongs to a uses: step", path: ["with"] });
  });
export type PipelineStep = z.infer<typeof StepShape>;

const ScriptShape = z.union([
  z.string().min(1),
  z
    .object({
      source: z.string().min(1).optional(),
      file: z.string().min(1).max(1024).optional(),
      interpreter: z.string().min(1).max(256).optional(),
    })
    .strict()
    .refine((s) => s.file === undefined, {
      error: "a file is not sent with the pipeline (the server never reads the files beside it): give the script inline as source",
      path: ["file"],
    })
    .refine((s) => s.source !== undefined, { error: "required: the script text", path: ["source"] }),
]);

const ApprovalShape = z
  .object({
    prompt: z.string().min(1),
    fields: z.array(z.record(z.string(), z.unknown())).max(50).optional(),
    timeout: duration.optional(),
  })
  .strict();
const WaitShape = z.object({ type: eventType, when: z.string().optional(), timeout: duration.optional() }).strict();

/** The kinds of job: exactly one of these keys. */
export const JOB_KINDS = ["steps", "script", "approval", "wait_for_event"] as const;

export const JobShape = z
  .object({
    name: z.string().max(256).optional(),
    needs: z.union([z.string(), z.array(z.string()).max(PIPELINE_LIMITS.jobs)]).optional(),
    if: z.union([z.string(), z.boolean()]).optional(),
    steps: z.array(StepShape).min(1).max(PIPELINE_LIMITS.steps).optional(),
    script: ScriptShape.optional(),
    approval: ApprovalShape.optional(),
    wait_for_event: WaitShape.optional(),
    env: envMap.optional(),
    credentials: credentialMap.optional(),
    requires: z.string().min(1).max(128).optional(),
    retry: z
      .object({ attempts: z.number().int().min(1).max(20), backoff: duration.optional() })
      .strict()
      .optional(),
    timeout: duration.optional(),
    concurrency: ConcurrencyShape.optional(),
  })
  .strict()
  .superRefine((j, ctx) => {
    const kinds = JOB_KINDS.filter((k) => j[k] !== undefined);
    if (kinds.length !== 1)
      ctx.addIssue({
        code: "custom",
        message: `a job has exactly one of ${JOB_KINDS.join(", ")}; ${kinds.length === 0 ? "none was given" : `got ${kinds.join(", ")}`}`,
        path: kinds.length > 1 ? [kinds[1]!] : [],
      });
  });
export type PipelineJob = z.infer<typeof JobShape>;

export const PipelineShape = z
  .object({
    version: z.literal(PIPELINE_VERSION, { error: `must be "${PIPELINE_VERSION}"` }).optional(),
    name: z.string().max(256).optional(),
    env: envMap.optional(),
    credentials: credentialMap.optional(),
    concurrency: ConcurrencyShape.optional(),
    cancel_on: z.array(eventType).max(32).optional(),
    jobs: z
      .record(z.string().max(48, { error: JOB_ID_RULE }).regex(JOB_ID, { error: JOB_ID_RULE }), JobShape)
      .refine((jobs) => Object.keys(jobs).length > 0, { error: "a pipeline needs at least one job" })
      .refine((jobs) => Object.keys(jobs).length <= PIPELINE_LIMITS.jobs, { error: `a pipeline has at most ${PIPELINE_LIMITS.jobs} jobs` }),
  })
  .strict();
export type PipelineDocument = z.infer<typeof PipelineShape>;

/** One thing wrong with a pipeline: where in the YAML (1-based line and column), the value's path, and what. */
export interface PipelineProblem {
  line: number;
  column: number;
  path: string;
  message: string;
}
