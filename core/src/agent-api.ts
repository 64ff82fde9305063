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

export const AnnotateRequestSchema = z.object({ markdown: z.string().min(1).max(64 * 1024) });

export const FinishRequestSchema = z.object({
  exit_code: z.number().int(),
  outputs: z.record(z.string(), z.string()).default({}),
  error: z.string().max(64 * 1024).optional(),
  duration_ms: z.number().int().nonnegative(),
});
export type FinishRequest = z.infer<typeof FinishRequestSchema>;

/** Step output cap (spec, Limits). */
export const STEP_OUTPUT_LIMIT = 2 * 1024 * 1024;
export const SOCKET_PROTOCOL_VERSION = 2;
