/**
 * Runs a step body as the native client does (agent-image/native/flow.c, run_body): the
 * script's environment minus every FLOW_* variable, plus FLOW_IDEMPOTENCY_KEY; the same cwd;
 * stdin and stderr inherited; stdout copied live to ours and kept up to the record limit.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { constants } from "node:os";
import type { ClientEnv } from "./command-kit.js";
import { errorCode, errnoText, say, writeAll } from "./io.js";

/** The most stdout a step record keeps (spec "Limits": step output 2 MiB). */
export const STEP_OUTPUT_LIMIT = 2 * 1024 * 1024;

export interface StepBodyResult {
  exit: number;
  /** The first STEP_OUTPUT_LIMIT bytes of stdout. */
  kept: Buffer;
  /** Every byte the body wrote to stdout. */
  total: number;
}

export const stepBodyEnv = (env: ClientEnv, idempotencyKey: string): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && !k.startsWith("FLOW_")) out[k] = v;
  out.FLOW_IDEMPOTENCY_KEY = idempotencyKey;
  return out;
};

/** What a shell says when it cannot run a command: 127 when missing, 126 otherwise. */
const execFailure = (file: string, err: unknown): number => {
  const code = errorCode(err) ?? "ENOENT";
  const why = code === "ENOENT" && !file.includes("/") ? "command not found" : errnoText({ code });
  say(2, `flow step: ${file}: ${why}`);
  return code === "ENOENT" ? 127 : 126;
};

const exitStatus = (code: number | null, signal: NodeJS.Signals | null): number => {
  if (code !== null) return code;
  return signal !== null ? 128 + (constants.signals[signal] ?? 0) : 1;
};

export const runStepBody = (cmd: readonly string[], env: ClientEnv, idempotencyKey: string): Promise<StepBodyResult> => {
  const [file = "", ...args] = cmd;
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let total = 0;
  let stdoutOk = true;
  const result = (exit: number): StepBodyResult => ({ exit, kept: Buffer.concat(kept), total });
  let child: ChildProcess;
  try {
    child = spawn(file, args, { env: stepBodyEnv(env, idempotencyKey), stdio: ["inherit", "pipe", "inherit"] });
  } catch (err) {
    return Promise.resolve(result(execFailure(file, { code: "ENOENT", cause: err }))); // an empty name: execvp says ENOENT
  }
  child.stdout?.on("data", (chunk: Buffer) => {
    if (stdoutOk) stdoutOk = writeAll(1, chunk); // reader gone: keep recording
    if (keptBytes < STEP_OUTPUT_LIMIT) {
      const part = chunk.subarray(0, STEP_OUTPUT_LIMIT - keptBytes);
      kept.push(part);
      keptBytes += part.length;
    }
    total += chunk.length;
  });
  return new Promise((resolve) => {
    let settled = false;
    const settle = (exit: number): void => {
      if (!settled) resolve(result(exit));
      settled = true;
    };
    child.once("error", (err) => {
      if (child.pid === undefined) settle(execFailure(file, err));
    });
    child.once("close", (code, signal) => settle(exitStatus(code, signal)));
  });
};
