/**
 * Starts the script (or an activity's command) in a process group of its own (`detached`), so the
 * agent can end it and every process it started with one signal to the group. stdin is ignored,
 * stdout is the capture pipe (or, without one, a pipe the caller reads), stderr a pipe of its own.
 * The command is looked up as execvp does, on the PATH of `env`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { missingInterpreterHint } from "@flowsvc/core";
import type { CapturePipe } from "./capture-pipe.js";
import { groupHasLiveMember } from "./process-group.js";
import { signalName, type ScriptSpawner } from "./script-spawner.js";
import { constants as osConstants } from "node:os";
import { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";

export interface ScriptExit {
  /** The exit status as a shell reports it: the code, or 128 + n for death by signal n. */
  readonly exitCode: number;
  readonly signal: NodeJS.Signals | null;
  /** Set when the script could not be started at all (interpreter missing, ...). */
  readonly startError?: string;
}

export interface RunningScript {
  /** Also the process group id. */
  readonly pid: number | undefined;
  /** Set only when no `stdoutFd` was given. */
  readonly stdout: Readable | undefined;
  readonly stderr: Readable;
  readonly exited: Promise<ScriptExit>;
  /** Sends `signal` to the whole group (0 only probes); false when no process of it is left. */
  signalGroup(signal: NodeJS.Signals | 0): boolean;
  /** SIGTERM to the group, SIGKILL after `graceMs` if any process of it is still there. */
  terminate(graceMs: number): Promise<void>;
}

export interface StartScriptOptions {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  /** The capture pipe's write end: the script's fd 1. Unset: stdout is a pipe (RunningScript.stdout). */
  readonly stdoutFd?: number;
}

export const exitStatusFromSignal = (signal: NodeJS.Signals): number => 128 + (osConstants.signals[signal] ?? 0);

/**
 * Why spawn refused to start `command`, in words that name the variable (or argument) at fault but
 * never quote it: Node's own message quotes the offending value, and an env value may be a secret
 * that would then reach the run's log, the agent's log and the server's.
 */
export const describeSpawnRefusal = (options: StartScriptOptions, err: unknown): string => {
  const what = `cannot start ${JSON.stringify(options.command)}`;
  const badVar = Object.entries(options.env).find(([k, v]) => k.includes("\0") || v.includes("\0"))?.[0];
  if (badVar !== undefined) {
    return `${what}: environment variable ${JSON.stringify(badVar.slice(0, 64))} holds a NUL byte, which a process environment cannot hold`;
  }
  if ([options.command, ...options.args, options.cwd].some((a) => a.includes("\0")))
    return `${what}: the command, an argument or the directory holds a NUL byte`;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return `${what}: spawn refused it (${typeof code === "string" ? code : "no error code"})`;
};

const endedStream = (): Readable => {
  const r = new Readable({ read: () => undefined });
  r.push(null);
  return r;
};

/** The RunningScript of a process that never started: it has exited already, with `startError`. */
const notStarted = (options: StartScriptOptions, startError: string): RunningScript => ({
  pid: undefined,
  stdout: options.stdoutFd === undefined ? endedStream() : undefined,
  stderr: endedStream(),
  exited: Promise.resolve({ exitCode: 127, signal: null, startError }),
  signalGroup: () => false,
  terminate: () => Promise.resolve(),
});

/** Signals to a started script's process group (its id is the script's pid). */
const groupControl = (pid: number | undefined): Pick<RunningScript, "signalGroup" | "terminate"> => {
  // Once the group was found empty it stays so: no process is left in it to start another. Its id
  // is not signalled again (a later process could take that number), and no failed kill per job
  // (each throws an ErrnoException) is paid twice.
  let groupGone = false;
  const signalGroup = (signal: NodeJS.Signals | 0): boolean => {
    if (pid === undefined || groupGone) return false;
    try {
      process.kill(-pid, signal);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ESRCH") groupGone = true; // the group is empty
      return false;
    }
  };
  const terminate = async (graceMs: number): Promise<void> => {
    if (pid === undefined || !signalGroup("SIGTERM")) return;
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline) {
      await sleep(Math.min(10, Math.max(1, deadline - Date.now())));
      if (!groupHasLiveMember(pid)) return;
    }
    signalGroup("SIGKILL");
  };
  return { signalGroup, terminate };
};

const startErrorOf = (command: string, message: string, code: string | undefined): string => {
  // A program not found on PATH (ENOENT, or EACCES from a PATH dir it may not search) gets what to install (issue 13).
  const hint = ["ENOENT", "EACCES"].includes(String(code)) ? `; ${missingInterpreterHint(command)}` : "";
  return `cannot start ${JSON.stringify(command)}: ${message}${hint}`;
};

const holdsNul = (options: StartScriptOptions): boolean =>
  [options.command, ...options.args, options.cwd].some((a) => a.includes("\0")) ||
  Object.entries(options.env).some(([k, v]) => k.includes("\0") || v.includes("\0"));

/** The exit of a raw wait status (undefined: unknown, the spawner ended before the script). */
const exitOfStatus = (status: number | undefined): ScriptExit => {
  if (status === undefined) return { exitCode: 1, signal: null, startError: "the agent's script spawner ended before the script did" };
  if ((status & 0x7f) === 0) return { exitCode: (status >> 8) & 0xff, signal: null };
  const signal = signalName(status & 0x7f);
  return { exitCode: 128 + (status & 0x7f), signal };
};

/**
 * Starts the script through the worker's spawner (script-spawner.ts): what startScript makes, but
 * stderr is `stderrPipe` (a FIFO, as stdout) and the agent does not fork. Both write ends are
 * closed here once the spawner answered. Undefined: the spawner is gone, start it with startScript.
 */
export const startScriptWith = async (
  spawner: ScriptSpawner,
  options: StartScriptOptions & { readonly stdoutPath: string; readonly stderrPipe: CapturePipe },
): Promise<RunningScript | undefined> => {
  const { stderrPipe } = options;
  if (holdsNul(options)) {
    stderrPipe.closeWriteEnd();
    return { ...notStarted(options, describeSpawnRefusal(options, undefined)), stderr: stderrPipe.reader };
  }
  let settle: (exit: ScriptExit) => void = () => undefined;
  const exited = new Promise<ScriptExit>((resolve) => (settle = resolve));
  const answer = await spawner.start(
    {
      command: options.command,
      args: options.args,
      cwd: options.cwd,
      env: options.env,
      stdoutPath: options.stdoutPath,
      stderrPath: `/proc/${process.pid}/fd/${stderrPipe.writeFd}`,
    },
    (status) => settle(exitOfStatus(status)),
  );
  stderrPipe.closeWriteEnd();
  if ("unusable" in answer) return undefined;
  if ("errno" in answer) {
    if (!spawner.alive) return undefined;
    const startError = startErrorOf(options.command, `spawn ${options.command} ${answer.errno}`, answer.errno);
    return { ...notStarted(options, startError), stderr: stderrPipe.reader };
  }
  return { pid: answer.pid, stdout: undefined, stderr: stderrPipe.reader, exited, ...groupControl(answer.pid) };
};

export const startScript = (options: StartScriptOptions): RunningScript => {
  const { command, args } = options;
  let child: ChildProcess;
  try {
    child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ["ignore", options.stdoutFd ?? "pipe", "pipe"],
    });
  } catch (err) {
    // A refusal before any process exists (a NUL byte in a variable...): the job ends as a failed
    // start, exit 127 and a message without the value, instead of the agent failing on it.
    return notStarted(options, describeSpawnRefusal(options, err));
  }
  const pid = child.pid;

  const exited = new Promise<ScriptExit>((resolve) => {
    child.once("error", (err) => {
      // Only a failed start reaches here without an exit: report it as a shell would (127).
      if (child.pid === undefined)
        resolve({ exitCode: 127, signal: null, startError: startErrorOf(command, err.message, (err as NodeJS.ErrnoException).code) });
    });
    child.once("exit", (code, signal) => {
      resolve({ exitCode: code ?? (signal ? exitStatusFromSignal(signal) : 1), signal });
    });
  });

  return { pid, stdout: child.stdout ?? undefined, stderr: child.stderr!, exited, ...groupControl(pid) };
};
