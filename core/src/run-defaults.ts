import { pickInterpreter } from "./interpreter.js";
import { SCRIPT_WORKFLOW } from "./workflow-types.js";

/**
 * What a new run is made of, and its defaults, for every way a run is created: `flow submit`,
 * `flow spawn`, `flow rerun` and a handler's run of an event (spec: "Handler", "Interpreter
 * defaults"). Pure; the store inserts what `newRunDefaults` returns (store/src/run-lifecycle.ts
 * `createRuns`), so no insert picks a default of its own.
 */

/** A script handler always runs under `bash -eu`, whatever the file's extension or shebang (spec: "Handler"). */
export const HANDLER_INTERPRETER: readonly string[] = ["bash", "-eu"];
/** ... and needs an agent with the `polyglot` capability. */
export const HANDLER_CAPABILITIES: readonly string[] = ["polyglot"];

/** The run a handler starts for an event: its id derives from (event, handler); its chain is one generation deeper. */
export interface HandlerOrigin {
  name: string;
  eventId: string;
  /** The event's generation + 1. */
  generation: number;
}

export interface RunRequest {
  id: string;
  projectId: string;
  source: string;
  filename: string;
  /** Whether the run may see secrets: `trustOf` (core/src/trust.ts) of what started it. No default. */
  trusted: boolean;
  /** Default: a script run (SCRIPT_WORKFLOW). */
  workflow?: string;
  /** Default: picked by the filename's extension (`pickInterpreter`). A handler's run ignores it. */
  interpreter?: readonly string[];
  env?: Readonly<Record<string, string>>;
  tags?: readonly string[];
  /** What started it, as `run.*` events report it. Default: a manual run. */
  trigger?: Record<string, unknown>;
  idempotencyKey?: string | null;
  createdBy?: string | null;
  parentRunId?: string | null;
  retry?: { attempts: number; backoff_ms: number } | null;
  rerunOf?: string | null;
  /** The capabilities its jobs need. Default: none. A handler's run ignores it. */
  capabilities?: readonly string[];
  handler?: HandlerOrigin;
  /**
   * The event that started a run that is not a handler's (a schedule's tick): the run reads its
   * envelope from FLOW_INPUT_FILE. A handler's run takes its handler's event.
   */
  eventId?: string | null;
}

/** A run with every field decided: what the store inserts. */
export interface NewRun {
  id: string;
  projectId: string;
  workflow: string;
  source: string;
  filename: string;
  interpreter: string[];
  env: Record<string, string>;
  tags: string[];
  trigger: Record<string, unknown>;
  idempotencyKey: string | null;
  createdBy: string | null;
  parentRunId: string | null;
  retry: { attempts: number; backoff_ms: number } | null;
  rerunOf: string | null;
  trusted: boolean;
  capabilities: string[];
  handlerName: string | null;
  eventId: string | null;
  generation: number;
}

/** What only a handler's run decides: its interpreter, capabilities and origin. */
const handlerFields = (r: RunRequest): Pick<NewRun, "interpreter" | "capabilities" | "handlerName" | "eventId" | "generation"> =>
  r.handler
    ? {
        interpreter: [...HANDLER_INTERPRETER],
        capabilities: [...HANDLER_CAPABILITIES],
        handlerName: r.handler.name,
        eventId: r.handler.eventId,
        generation: r.handler.generation,
      }
    : {
        interpreter: r.interpreter ? [...r.interpreter] : pickInterpreter(r.filename),
        capabilities: [...(r.capabilities ?? [])],
        handlerName: null,
        eventId: r.eventId ?? null,
        generation: 0,
      };

/** The complete run a request makes: every field it leaves out gets its default. */
export const newRunDefaults = (r: RunRequest): NewRun => ({
  id: r.id,
  projectId: r.projectId,
  workflow: r.workflow ?? SCRIPT_WORKFLOW,
  source: r.source,
  filename: r.filename,
  env: { ...r.env },
  tags: [...(r.tags ?? [])],
  trigger: r.trigger ?? { type: "manual" },
  idempotencyKey: r.idempotencyKey ?? null,
  createdBy: r.createdBy ?? null,
  parentRunId: r.parentRunId ?? null,
  retry: r.retry ?? null,
  rerunOf: r.rerunOf ?? null,
  trusted: r.trusted,
  ...handlerFields(r),
});
