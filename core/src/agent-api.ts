/**
 * The agent API's bodies (docs/internals.md, "Agent API"): one zod schema per message, used by the
 * server to validate what an agent sends and by the agent to validate what the server answers.
 */
import { z } from "zod";

export const JournalEntrySchema = z.object({
  position: z.number().int().nonnegative(),
  kind: z.string().min(1).max(64),
  name: z.string().max(512),
  ordinal: z.number().int().nonnegative(),
  status: z.enum(["pending", "done"]),
  result: z.unknown().nullable(),
});
export type JournalEntry = z.infer<typeof JournalEntrySchema>;

/** Result of a recorded step: stdout as base64 (byte-exact) and the exit code. */
export const StepResultSchema = z.object({
  stdout_b64: z.string(),
  exit: z.number().int(),
  error: z.string().optional(),
});
export type StepResult = z.infer<typeof StepResultSchema>;

export const ClaimRequestSchema = z.object({
  agent_id: z.string().min(1).max(64),
  capabilities: z.array(z.string().max(64)).max(64).default([]),
});
export type ClaimRequest = z.infer<typeof ClaimRequestSchema>;

export const ClaimResponseSchema = z.object({
  job_id: z.string(),
  run_id: z.string(),
  project: z.string(),
  attempt: z.number().int(),
  source: z.string(),
  filename: z.string(),
  interpreter: z.array(z.string()).min(1),
  /** Workflow env merged over the project's secrets (workflow env wins). Held in memory only. */
  env: z.record(z.string(), z.string()),
  /** Values to mask in output: every secret value of the project. */
  masks: z.array(z.string()),
  journal: z.array(JournalEntrySchema),
  lease_ms: z.number().int().positive(),
  trigger: z.record(z.string(), z.unknown()),
  /** The envelope of the event that started a handler run: FLOW_INPUT_FILE holds it, whole. */
  input: z.unknown().optional(),
  /** The claiming request's id: the agent sends it as X-Request-Id on the job's other calls (core/src/request-id.ts). */
  request_id: z.string().max(128).optional(),
});
export type ClaimResponse = z.infer<typeof ClaimResponseSchema>;

export const RecordRequestSchema = JournalEntrySchema.omit({ status: true }).extend({
  status: z.enum(["pending", "done"]).default("done"),
});
export type RecordRequest = z.infer<typeof RecordRequestSchema>;

export const LogChunkSchema = z.object({
  stream: z.enum(["stdout", "stderr", "system"]),
  data: z.string(),
});
export type LogChunk = z.infer<typeof LogChunkSchema>;

export const LogRequestSchema = z.object({ chunks: z.array(LogChunkSchema).max(10_000) });

/** A run annotation's longest markdown, in UTF-16 units (the in-script `flow annotate` refuses past it first). */
export const ANNOTATION_MAX = 64 * 1024;

export const AnnotateRequestSchema = z.object({
  markdown: z.string().min(1).max(ANNOTATION_MAX),
});

export const FinishRequestSchema = z.object({
  exit_code: z.number().int(),
  outputs: z.record(z.string(), z.string()).default({}),
  error: z
    .string()
    .max(64 * 1024)
    .optional(),
  duration_ms: z.number().int().nonnegative(),
  /**
   * The job's last log batch, appended in the finish's own transaction (one request and one commit
   * fewer per job): what the agent had not shipped yet when the script ended, in order after every
   * batch already sent to /log.
   */
  log: z.array(LogChunkSchema).max(10_000).optional(),
});
export type FinishRequest = z.infer<typeof FinishRequestSchema>;

/** Step output cap (spec, Limits). */
export const STEP_OUTPUT_LIMIT = 2 * 1024 * 1024;
export const SOCKET_PROTOCOL_VERSION = 2;

// ---- Issue 3: durable calls that may park the run, state, activities --------------------------

/**
 * Durable kinds beyond `step`. Each is recorded at its position; the server decides at once
 * (`done`) or parks it (`pending`: the agent ends the script and calls /agent/v1/suspend).
 */
export const DURABLE_KINDS = [
  "step",
  "sleep",
  "wait-signal",
  "wait-event",
  "lock",
  "unlock",
  "activity",
  "activity-submit",
  "activity-collect",
  "activity-wait-all",
  "spawn",
  "emit",
  "call",
] as const;
export type DurableKind = (typeof DURABLE_KINDS)[number];

/** `args` per kind, as the agent sends them to POST /agent/v1/call. */
export const CallArgsSchemas = {
  sleep: z.object({ duration_ms: z.number().int().nonnegative() }),
  "wait-signal": z.object({ timeout_ms: z.number().int().nonnegative().optional() }),
  "wait-event": z.object({ timeout_ms: z.number().int().nonnegative().optional() }),
  lock: z.object({}),
  unlock: z.object({}),
  activity: z.object({ argv: z.array(z.string()).min(1).max(4096), requires: z.array(z.string().min(1).max(64)).max(16).default([]) }),
  "activity-submit": z.object({
    argv: z.array(z.string()).min(1).max(4096),
    requires: z.array(z.string().min(1).max(64)).max(16).default([]),
  }),
  "activity-collect": z.object({}),
  "activity-wait-all": z.object({}),
  emit: z.object({
    type: z.string().min(1).max(64),
    key: z.string().min(1).max(512).nullable().optional(),
    payload: z.unknown().optional(),
  }),
  spawn: z.object({
    source: z.string().max(1024 * 1024),
    filename: z.string().min(1).max(255),
    as: z.enum(["script", "pipeline"]).default("script"),
    tags: z.array(z.string().min(1).max(128)).max(32).default([]),
  }),
  /** `flow call`: exactly one of `node` (a kind, with `config`), `graph` (a stored graph's name) or `definition` (a document's JSON text). */
  call: z
    .object({
      node: z.string().min(1).max(128).optional(),
      config: z.record(z.string(), z.unknown()).optional(),
      graph: z.string().min(1).max(100).optional(),
      definition: z
        .string()
        .max(1024 * 1024)
        .optional(),
      input: z.unknown().optional(),
    })
    .strict()
    .refine((a) => [a.node, a.graph, a.definition].filter((v) => v !== undefined).length === 1, {
      message: "give exactly one of node, graph or definition",
    }),
} as const;

export const CallRequestSchema = z.object({
  position: z.number().int().nonnegative(),
  kind: z.enum(DURABLE_KINDS),
  name: z.string().max(512),
  ordinal: z.number().int().nonnegative(),
  args: z.record(z.string(), z.unknown()).default({}),
});
export type CallRequest = z.infer<typeof CallRequestSchema>;

/**
 * Results stored in the journal, per kind:
 * sleep `{}`; wait-signal `{payload}` or `{timed_out: true}`; lock `{granted_at}`; unlock `{}`;
 * activity and activity-collect `{stdout_b64, exit}`; activity-submit `{activity_id}`;
 * activity-wait-all `{failed}`; spawn `{run_id}`; call `{run_id, status, output, error}` (the child graph run's end).
 */
export const CallResponseSchema = z.discriminatedUnion("status", [
  z.object({ status: z.literal("done"), entry: JournalEntrySchema }),
  z.object({
    status: z.literal("pending"),
    entry: JournalEntrySchema,
    substate: z.object({ name: z.string(), kind: z.string() }),
    deadline: z.string().nullable(),
  }),
]);
export type CallResponse = z.infer<typeof CallResponseSchema>;

export const SuspendResponseSchema = z.object({ status: z.enum(["parked", "requeued"]) });

export const StateRequestSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("get"), key: z.string().min(1).max(512), entity: z.string().min(1).max(256).optional() }),
  z.object({ op: z.literal("set"), key: z.string().min(1).max(512), entity: z.string().min(1).max(256).optional(), value: z.unknown() }),
  z.object({ op: z.literal("delete"), key: z.string().min(1).max(512), entity: z.string().min(1).max(256).optional() }),
  z.object({ op: z.literal("list"), entity: z.string().min(1).max(256).optional() }),
]);
export type StateRequest = z.infer<typeof StateRequestSchema>;
export const StateResponseSchema = z.object({
  value: z.unknown().optional(),
  found: z.boolean().optional(),
  items: z.array(z.object({ key: z.string(), value: z.unknown() })).optional(),
});

/** The claim of an activity child: a command, not a script. */
export const ActivityClaimSchema = z.object({
  kind: z.literal("activity"),
  job_id: z.string(),
  run_id: z.string(),
  activity_id: z.string(),
  name: z.string(),
  project: z.string(),
  attempt: z.number().int(),
  argv: z.array(z.string()).min(1),
  env: z.record(z.string(), z.string()),
  masks: z.array(z.string()),
  lease_ms: z.number().int().positive(),
  request_id: z.string().max(128).optional(),
});
export type ActivityClaim = z.infer<typeof ActivityClaimSchema>;

export const AnyClaimSchema = z.union([ClaimResponseSchema.extend({ kind: z.literal("script").default("script") }), ActivityClaimSchema]);

/** An activity child's finish: its exit code and captured stdout (at most STEP_OUTPUT_LIMIT). */
export const ActivityFinishRequestSchema = z.object({
  exit_code: z.number().int(),
  stdout_b64: z.string(),
  error: z
    .string()
    .max(64 * 1024)
    .optional(),
  duration_ms: z.number().int().nonnegative(),
});

/**
 * The local launcher and a worker-mode agent talk over Node's IPC channel (docs/internals.md,
 * "Local agents"): a job goes to an idle worker, which answers `ready` once, then per job `group` (its
 * script's process group) and `done`.
 * Both sides parse what they receive with these.
 */
export const WorkerJobSchema = z.object({
  type: z.literal("job"),
  jobId: z.string().min(1).max(64),
  runId: z.string().min(1).max(64),
  attempt: z.number().int().positive(),
  token: z.string().min(1),
  agentId: z.string().min(1).max(64),
  workdir: z.string().min(1).startsWith("/", "must be an absolute path"),
});
export type WorkerJob = z.infer<typeof WorkerJobSchema>;

export const JOB_OUTCOMES = ["finished", "suspended", "lost", "stopped", "not_claimed"] as const;

export const WorkerReplySchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("ready") }),
  z.object({ type: z.literal("done"), jobId: z.string(), outcome: z.enum(JOB_OUTCOMES) }),
  // The job's script (or command) started in process group `pgid`: the launcher ends that group
  // should the agent die before `done`.
  z.object({ type: z.literal("group"), jobId: z.string(), pgid: z.number().int().min(2) }),
]);
export type WorkerReply = z.infer<typeof WorkerReplySchema>;
