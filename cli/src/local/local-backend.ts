/**
 * The local engine behind `flow run`: an AgentBackend (agent-image/src/backend.ts) that lives in
 * the `flow run` process, so the agent's own job runner runs the script in place with no server.
 *
 * - claim answers the file: its source, interpreter, `--env` values, no secrets (no masks) and the
 *   run's recorded journal: empty, unless the run directory was handed one (`journal.json`,
 *   local-run-dir.ts). A call at a recorded position is checked with core's determinism rule
 *   (assertSameCall) exactly as the server does, and answers the recorded result; every other
 *   call is new and is resolved IN PLACE, so `call` never answers `pending` and `suspend` is
 *   never needed.
 * - sleep waits the duration; wait-signal waits for the run's spool (signal-spool.ts) or its
 *   timeout (`{timed_out: true}`); lock queues on a lock file (lock-queue.ts), held until unlock
 *   or the run's end; activities run as local processes (local-activities.ts); spawn starts
 *   another local run in the background (local-spawn.ts); state is local-state.ts.
 * - wait-event, emit and call need the event bus and graphs of a server: refused (needsServer: the
 *   message names the `flow submit` that runs the script on one, since the script prints only it).
 * - log writes the chunks straight to the terminal (there is nothing to mask).
 */
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { AgentBackend, AnyClaim, StateAnswer } from "@flowsvc/agent";
import type { z } from "zod";
import { CallArgsSchemas, FlowError, assertSameCall, decideWait, describeIssues, grantsAtOnce, waitDeadline } from "@flowsvc/core";
import type {
  CallRequest,
  CallResponse,
  ClaimRequest,
  FinishRequest,
  JournalEntry,
  LogChunk,
  RecordRequest,
  StateRequest,
} from "@flowsvc/core";
import { LocalActivities } from "./local-activities.js";
import type { LocalRunDir } from "./local-run-dir.js";
import { spawnLocalRun } from "./local-spawn.js";
import type { SpawnRequest } from "./local-spawn.js";
import { LocalState } from "./local-state.js";
import { acquireLock } from "./lock-queue.js";
import type { HeldLock } from "./lock-queue.js";
import { needsServer } from "./needs-server.js";
import { waitForSignal } from "./signal-spool.js";

/** Where the run's output goes: the terminal. A promise holds the script back until written. */
export interface LocalOutput {
  stdout(text: string): void | Promise<void>;
  stderr(text: string): void | Promise<void>;
}

export interface LocalBackendOptions {
  readonly run: LocalRunDir;
  readonly stateDir: string;
  /** The script and how to run it. */
  readonly source: string;
  readonly filename: string;
  /** The file as `flow run` was given it: what a refusal tells the user to `flow submit`. */
  readonly file?: string;
  readonly interpreter: readonly string[];
  /** `--env` values: the claim's env (there are no secrets locally). */
  readonly env: Readonly<Record<string, string>>;
  /** The run's working directory: activities run there too. */
  readonly cwd: string;
  /** The environment of activity children (the step-body environment: no FLOW_*). */
  readonly activityEnv: Readonly<Record<string, string>>;
  /** The environment a spawned `flow run` starts with. */
  readonly spawnEnv: Readonly<Record<string, string | undefined>>;
  readonly output: LocalOutput;
  /** What an earlier pass recorded (a resumed run); empty for a new run. */
  readonly journal?: readonly JournalEntry[];
}

/** A local run has no lease; the agent's heartbeat still wants a figure (it asks every lease/3). */
const LOCAL_LEASE_MS = 3_600_000;

export class LocalBackend implements AgentBackend {
  readonly #o: LocalBackendOptions;
  readonly #journal = new Map<number, JournalEntry>();
  /** Aborted by close(): every wait in progress gives up. */
  readonly #closing = new AbortController();
  readonly #locks = new Map<string, HeldLock>();
  readonly #activities: LocalActivities;
  readonly #state: LocalState;
  #finish: FinishRequest | undefined;
  /** The agent's own lines on the run's output ("system" chunks). */
  readonly #shown: string[] = [];

  constructor(options: LocalBackendOptions) {
    this.#o = options;
    for (const entry of options.journal ?? []) this.#journal.set(entry.position, entry);
    this.#activities = new LocalActivities({ cwd: options.cwd, env: options.activityEnv, stderr: (t) => void options.output.stderr(t) });
    this.#state = new LocalState({ stateDir: options.stateDir, runId: options.run.runId, signal: this.#closing.signal });
  }

  get runId(): string {
    return this.#o.run.runId;
  }

  /** What the script finished with, once it did. */
  get finished(): FinishRequest | undefined {
    return this.#finish;
  }

  /** Names of activity-submit children never collected nor counted by activity-wait-all. */
  unreportedActivities(): string[] {
    return this.#activities.unreported();
  }

  claim(_body: ClaimRequest): Promise<AnyClaim> {
    return Promise.resolve({
      kind: "script" as const,
      job_id: this.#o.run.runId.replace(/^run-/, "job-"),
      run_id: this.#o.run.runId,
      project: "local",
      attempt: 1,
      source: this.#o.source,
      filename: this.#o.filename,
      interpreter: [...this.#o.interpreter],
      env: { ...this.#o.env },
      masks: [],
      journal: [...this.#journal.values()],
      lease_ms: LOCAL_LEASE_MS,
      trigger: { type: "manual" },
    });
  }

  heartbeat(): Promise<number | undefined> {
    return Promise.resolve(undefined);
  }

  /** As the server's record: the first write at a position stands; a different call there is refused. */
  record(body: RecordRequest): Promise<JournalEntry> {
    return Promise.resolve().then(() => this.#recorded(body) ?? this.#store(body, body.status, body.result));
  }

  async call(body: CallRequest): Promise<CallResponse> {
    const recorded = this.#recorded(body);
    if (recorded?.status === "done") return { status: "done", entry: recorded };
    const result = await this.#resolve(body);
    return { status: "done", entry: this.#store(body, "done", result) };
  }

  suspend(): Promise<"parked" | "requeued"> {
    return Promise.reject(new FlowError("internal", "a local run never parks: its calls are resolved in place"));
  }

  state(body: StateRequest): Promise<StateAnswer> {
    return this.#state.apply(body);
  }

  async log(chunks: readonly LogChunk[]): Promise<void> {
    for (const chunk of chunks) {
      if (chunk.stream === "system") this.#shown.push(chunk.data);
      await (chunk.stream === "stdout" ? this.#o.output.stdout(chunk.data) : this.#o.output.stderr(chunk.data));
    }
  }

  /** True when the agent already printed `text` on the run's output (a start failure, ...). */
  wasShown(text: string): boolean {
    return this.#shown.some((shown) => shown.includes(text));
  }

  async annotate(markdown: string): Promise<void> {
    await this.#o.output.stderr(`flow: annotation: ${markdown}${markdown.endsWith("\n") ? "" : "\n"}`);
  }

  async finish(body: FinishRequest): Promise<string | undefined> {
    if (body.log) await this.log(body.log);
    this.#finish = body;
    return body.exit_code === 0 ? "succeeded" : "failed";
  }

  finishActivity(): Promise<string | undefined> {
    return Promise.reject(new FlowError("internal", "a local run runs its activities itself; it claims none"));
  }

  /** Ends every wait, activity child and lease of the run. Safe to call more than once. */
  async close(): Promise<void> {
    this.#closing.abort(new FlowError("unavailable", "the local run is ending"));
    this.#activities.killAll();
    const locks = [...this.#locks.values()];
    this.#locks.clear();
    await Promise.all(locks.map((l) => l.release()));
  }

  /** The entry recorded at the call's position, after core's determinism check; undefined when none. */
  #recorded(call: RecordRequest | CallRequest): JournalEntry | undefined {
    const recorded = this.#journal.get(call.position);
    if (recorded) assertSameCall(recorded, call);
    return recorded;
  }

  #store(call: Omit<JournalEntry, "status" | "result">, status: JournalEntry["status"], result: unknown): JournalEntry {
    const entry: JournalEntry = {
      position: call.position,
      kind: call.kind,
      name: call.name,
      ordinal: call.ordinal,
      status,
      result: result ?? null,
    };
    this.#journal.set(entry.position, entry);
    return entry;
  }

  async #resolve(body: CallRequest): Promise<unknown> {
    const signal = this.#closing.signal;
    switch (body.kind) {
      case "sleep":
        await sleepFor(argsOf("sleep", body.args).duration_ms, signal);
        return {};
      case "wait-signal":
        return waitForSignal(this.#o.run, body.name, argsOf("wait-signal", body.args).timeout_ms, signal);
      case "lock":
        return this.#lock(body.name);
      case "unlock":
        await this.#unlock(body.name);
        return {};
      case "activity":
        return this.#activities.run(argsOf("activity", body.args).argv);
      case "activity-submit":
        this.#activities.submit(body.name, argsOf("activity-submit", body.args).argv);
        return { activity_id: `${this.runId}/${body.name}` };
      case "activity-collect":
        return this.#activities.collect(body.name);
      case "activity-wait-all":
        return { failed: await this.#activities.waitAll() };
      case "spawn":
        return this.#spawn(argsOf("spawn", body.args));
      default:
        throw needsServer(`flow ${body.kind}`, "a local run has no event bus or graphs", this.#o.file ?? this.#o.filename);
    }
  }

  async #lock(group: string): Promise<unknown> {
    // A group this run already holds is granted again (core's grantsAtOnce: a run never waits for itself).
    if (!grantsAtOnce(this.#locks.has(group))) {
      const held = await acquireLock(join(this.#o.stateDir, "locks"), group, this.runId, this.#closing.signal);
      if (this.#closing.signal.aborted) {
        await held.release(); // granted while the run was ending: close() has already released the others
        this.#closing.signal.throwIfAborted();
      }
      this.#locks.set(group, held);
    }
    return { granted_at: new Date().toISOString() };
  }

  async #unlock(group: string): Promise<void> {
    const held = this.#locks.get(group);
    this.#locks.delete(group);
    await held?.release();
  }

  async #spawn(req: SpawnRequest): Promise<unknown> {
    if (req.as !== "script")
      throw needsServer(`flow spawn --as ${req.as}`, "a local run spawns scripts only", this.#o.file ?? this.#o.filename);
    const spawned = await spawnLocalRun(req, { stateDir: this.#o.stateDir, cwd: this.#o.cwd, env: this.#o.spawnEnv });
    await this.#o.output.stderr(`flow: spawned local run ${spawned.runId} in the background; its output goes to ${spawned.logFile}\n`);
    return { run_id: spawned.runId };
  }
}

/** Node timers take at most 2^31-1 ms (24.8 days); `flow sleep 30d` waits in pieces. */
const MAX_TIMER_MS = 2_147_483_647;

/** Sleeps until core's decideWait says the sleep expired. */
const sleepFor = async (ms: number, signal: AbortSignal): Promise<void> => {
  const deadlineMs = waitDeadline(Date.now(), ms);
  while (decideWait({ kind: "sleep", deadlineMs }, Date.now()).state === "pending") {
    await sleep(Math.min((deadlineMs ?? 0) - Date.now(), MAX_TIMER_MS), undefined, { signal });
  }
  signal.throwIfAborted();
};

type ArgsKind = keyof typeof CallArgsSchemas;

/** A call's args as core's CallArgsSchemas says they look for `kind`. */
const argsOf = <K extends ArgsKind>(kind: K, args: Record<string, unknown>): z.infer<(typeof CallArgsSchemas)[K]> => {
  const parsed = CallArgsSchemas[kind].safeParse(args);
  if (!parsed.success) throw new FlowError("invalid_argument", `bad ${kind} call: ${describeIssues(parsed.error.issues)}`);
  return parsed.data as z.infer<(typeof CallArgsSchemas)[K]>;
};
