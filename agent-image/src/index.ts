/**
 * The agent as a library. `runJob(backend, options)` runs one job (a script or an activity child)
 * against any AgentBackend: the agent's main.ts passes the HTTP AgentApiClient; the local engine
 * of `flow run` passes its in-process backend and `cwd`/`scriptPath` to run the user's file in
 * place. The parts runJob is made of (script start, capture pipe, masking output pump, log
 * shipper, socket server and op handler) are exported for callers that assemble their own.
 */
export * from "./client/index.js";
export type { ActivityFinish, AgentBackend, AnyClaim, StateAnswer } from "./backend.js";
export { AgentApiClient, TransientApiError, isTransient } from "./agent-api-client.js";
export type { AgentApiClientOptions } from "./agent-api-client.js";
export { runJob } from "./run-job.js";
export type { JobOptions, JobOutcome, JobTimings } from "./run-job.js";
export { composeActivityEnv } from "./activity-env.js";
export { openCapturePipe } from "./capture-pipe.js";
export type { CapturePipe } from "./capture-pipe.js";
export { JournalCursor, idempotencyKeyFor } from "./journal-cursor.js";
export { LogShipper } from "./log-shipper.js";
export type { LogStream } from "./log-shipper.js";
export { createLogger, silentLogger } from "./logger.js";
export type { Logger } from "./logger.js";
export { createMaskedLog } from "./output-pump.js";
export { prepareScratchDir } from "./scratch-dir.js";
export type { ScratchDir } from "./scratch-dir.js";
export { startScript } from "./script-runner.js";
export type { RunningScript, ScriptExit } from "./script-runner.js";
export { createOpHandler } from "./socket-ops.js";
export type { OpContext, PendingCall } from "./socket-ops.js";
export { startSocketServer } from "./socket-server.js";
