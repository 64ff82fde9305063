// The run submission body (`POST .../runs`, spec "Submit") and a FlowRun's spec: one schema.
import { z } from "zod";
import { credentialMapProblems } from "../credentials/resolve.js";
import type { RunRequest } from "../run-defaults.js";
import { envMapProblems } from "../secret-rules.js";
import { trustOf } from "../trust.js";
import { ScriptFilename, SOURCE_LIMIT } from "./handler.js";

/**
 * core's one rule for a variable a user puts in a run's environment (secret-rules.ts's
 * envVariableProblem: `FLOW_*`, `LD_PRELOAD`, `PATH`... refused), checked after parsing so the
 * message names the variable (`env.LD_PRELOAD: ...`): zod reports a record key that fails its own
 * schema only as "Invalid key in record".
 */
const checkEnvNames = (env: Record<string, string>, ctx: z.RefinementCtx): void => {
  for (const { key, message } of envMapProblems(env)) ctx.addIssue({ code: "custom", path: [key], message });
};

export const RunSubmission = z
  .object({
    // Graphs and pipelines have bodies of their own (`as`, or `graph` for a stored one; routes/graph-submit.ts, pipeline-submit.ts).
    kind: z.literal("script", {
      error:
        'a script run takes kind "script"; a graph or pipeline is sent without kind, with "as": "graph" or "as": "pipeline" (or "graph": "<stored graph>")',
    }),
    source: z.string().max(SOURCE_LIMIT, `source is over ${SOURCE_LIMIT} bytes`),
    filename: ScriptFilename,
    interpreter: z.array(z.string().min(1)).min(1).max(16).optional(),
    env: z
      .record(z.string(), z.string().max(128 * 1024))
      .default({})
      .superRefine(checkEnvNames),
    // ENV_VAR -> credential name (`flow submit --credential`): names only, resolved at claim (core's resolver).
    credentials: z
      .record(z.string(), z.string())
      .default({})
      .superRefine((map, ctx) => {
        for (const message of credentialMapProblems(map, "")) ctx.addIssue({ code: "custom", message: message.replace(/^\./, "") });
      }),
    idempotency_key: z.string().min(1).max(255).optional(),
    tags: z.array(z.string().min(1).max(128)).max(32).default([]),
    retry: z
      .object({
        attempts: z.number().int().min(1).max(100),
        backoff_ms: z
          .number()
          .int()
          .min(0)
          .max(24 * 3600 * 1000)
          .default(0),
      })
      .strict()
      .optional(),
  })
  .strict();
export type RunSubmission = z.output<typeof RunSubmission>;

/** Who submitted a RunSubmission, and how a repeat of it is recognised. */
export interface Submitter {
  projectId: string;
  /** As `run.*` events and the bus's `manual` trigger report it (a user name, `kubernetes:<ns>/<name>`). */
  sender: string;
  /** The submitting user's id; null when the submitter is not a user (a FlowRun applied with kubectl). */
  createdBy: string | null;
  idempotencyKey: string | null;
}

/**
 * The run a person's submission makes, for every way in (`POST .../runs`, a FlowRun applied with
 * kubectl): a manual script run, trusted (a person's act, core/src/trust.ts); the workflow and
 * the interpreter take run-defaults' defaults unless the body names an interpreter.
 */
export const personSubmittedRun = (body: RunSubmission, who: Submitter): Omit<RunRequest, "id"> => ({
  projectId: who.projectId,
  source: body.source,
  filename: body.filename,
  ...(body.interpreter ? { interpreter: body.interpreter } : {}),
  env: body.env,
  tags: body.tags,
  trigger: { type: "manual", sender: who.sender },
  idempotencyKey: who.idempotencyKey,
  createdBy: who.createdBy,
  retry: body.retry ?? null,
  trusted: trustOf({ by: "person" }),
});
