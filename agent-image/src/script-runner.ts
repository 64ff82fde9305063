/**
 * Starts the script (or an activity's command) in a process group of its own (`detached`), so the
 * agent can end it and every process it started with one signal to the group. stdin is ignored,
 * stdout is the capture pipe (or, without one, a pipe the caller reads), stderr a pipe of its own.
 * The command is looked up as execvp does, on the PATH of `env`.
 */
import { spawn } from "node:child_process";
import { groupHasLiveMember } from "./process-group.js";
import { constants as osConstants } from "node:os";
import type { Readable } from "node:stream";
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

export const startScript = (options: StartScriptOptions): RunningScript => {
  const { command, args } = options;
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: ["ignore", options.stdoutFd ?? "pipe", "pipe"],
  });
  const pid = child.pid;

  const exited = new Promise<ScriptExit>((resolve) => {
    child.once("error", (err) => {
      // Only a failed start reaches here without an exit: report it as a shell would (127).
      if (child.pid === undefined) resolve({ exitCode: 127, signal: null, startError: `cannot start ${JSON.stringify(command)}: ${err.message}` });
    });
    child.once("exit", (code, signal) => {
      resolve({ exitCode: code ?? (signal ? exitStatusFromSignal(signal) : 1), signal });
    });
  });

  const signalGroup = (signal: NodeJS.Signals | 0): boolean => {
    if (pid === undefined) return false;
    try {
      process.kill(-pid, signal);
      return true;
    } catch {
      return false; // ESRCH: the group is empty
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

  return { pid, stdout: child.stdout ?? undefined, stderr: child.stderr!, exited, signalGroup, terminate };
};
