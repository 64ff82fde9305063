/**
 * Activities of a local run (`flow activity`, `activity-submit`, `activity-collect`,
 * `activity-wait-all`): each child is a local process, started in the run's working directory
 * (there is no other agent to dispatch to; `--requires` is not checked locally). It gets the
 * step-body environment (no FLOW_* variables), no stdin; its stdout is kept for the result (at
 * most STEP_OUTPUT_LIMIT bytes) and its stderr goes to the run's stderr. Each child runs in a
 * process group of its own, ended when the run ends.
 */
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { FlowError, STEP_OUTPUT_LIMIT, stepOutputTooLargeMessage } from "@flowsvc/core";

/** As a step's result (core StepResultSchema): `error` says why a child failed without its own word. */
export interface ActivityResult {
  readonly stdout_b64: string;
  readonly exit: number;
  readonly error?: string;
}

export interface ActivityOptions {
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  /** Where the child's stderr (and a start failure) goes. */
  readonly stderr: (text: string) => void;
}

interface Child {
  readonly done: Promise<ActivityResult>;
  readonly kill: () => void;
  /** Taken by activity-collect. */
  collected: boolean;
  /** Taken by activity-collect or counted by activity-wait-all. */
  reported: boolean;
}

const exitStatus = (code: number | null, signal: NodeJS.Signals | null): number =>
  code ?? (signal ? 128 + (constants.signals[signal] ?? 0) : 1);

const startChild = (argv: readonly string[], options: ActivityOptions): Child => {
  const [file = "", ...args] = argv;
  const child = spawn(file, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const kept: Buffer[] = [];
  let total = 0;
  child.stdout.on("data", (chunk: Buffer) => {
    if (total < STEP_OUTPUT_LIMIT) kept.push(chunk.subarray(0, STEP_OUTPUT_LIMIT - total));
    total += chunk.length;
  });
  child.stderr.setEncoding("utf8").on("data", (text: string) => options.stderr(text));
  const done = new Promise<ActivityResult>((resolve) => {
    child.once("error", (err) => {
      if (child.pid !== undefined) return;
      options.stderr(`flow activity: ${file}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "command not found" : err.message}\n`);
      resolve({ stdout_b64: "", exit: (err as NodeJS.ErrnoException).code === "ENOENT" ? 127 : 126 });
    });
    child.once("close", (code, signal) => {
      if (total > STEP_OUTPUT_LIMIT) {
        resolve({ stdout_b64: "", exit: 1, error: stepOutputTooLargeMessage(total) });
        return;
      }
      resolve({ stdout_b64: Buffer.concat(kept).toString("base64"), exit: exitStatus(code, signal) });
    });
  });
  const kill = (): void => {
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // the group is already gone
    }
  };
  return { done, kill, collected: false, reported: false };
};

/** The activities of one local run, by name. */
export class LocalActivities {
  readonly #children = new Map<string, Child>();
  /** Children of `flow activity` (no name kept), while they run. */
  readonly #anonymous = new Set<Child>();
  readonly #options: ActivityOptions;

  constructor(options: ActivityOptions) {
    this.#options = options;
  }

  /** `flow activity`: runs the child to its end. */
  async run(argv: readonly string[]): Promise<ActivityResult> {
    const child = startChild(argv, this.#options);
    this.#anonymous.add(child);
    try {
      return await child.done;
    } finally {
      this.#anonymous.delete(child);
    }
  }

  /** `flow activity-submit`: starts the child and returns; names must be distinct within the run. */
  submit(name: string, argv: readonly string[]): void {
    if (this.#children.has(name)) {
      throw new FlowError("invalid_argument", `an activity named ${JSON.stringify(name)} was already submitted in this run`, {
        hint: "give each activity-submit a distinct name",
      });
    }
    this.#children.set(name, startChild(argv, this.#options));
  }

  /** `flow activity-collect`: waits for the child to end and answers its result. */
  async collect(name: string): Promise<ActivityResult> {
    const child = this.#children.get(name);
    if (!child) throw new FlowError("not_found", `no activity named ${JSON.stringify(name)} was submitted in this run`);
    child.collected = true;
    child.reported = true;
    return child.done;
  }

  /** `flow activity-wait-all`: waits for every uncollected child; answers how many failed. */
  async waitAll(): Promise<number> {
    const open = [...this.#children.values()].filter((c) => !c.collected);
    for (const child of open) child.reported = true;
    const results = await Promise.all(open.map((c) => c.done));
    return results.filter((r) => r.exit !== 0).length;
  }

  /** Names of the children never collected nor counted by wait-all (the run's end says so). */
  unreported(): string[] {
    return [...this.#children].filter(([, c]) => !c.reported).map(([name]) => name);
  }

  /** Ends every child that is still running. */
  killAll(): void {
    for (const child of [...this.#children.values(), ...this.#anonymous]) child.kill();
  }
}
