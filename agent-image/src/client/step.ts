/**
 * `flow step <name> [--label <text>] -- <cmd...>`: runs the command once and records its stdout
 * and exit code; on replay the agent answers the record and the command does not run.
 */
import { agentSocket, usageError } from "./command-kit.js";
import type { ClientEnv, InScriptCommand } from "./command-kit.js";
import { AgentConnection } from "./connection.js";
import { applyOutput, applyResponse } from "./response.js";
import { ClientError } from "./io.js";

export interface StepArgs {
  name: string;
  label: string | undefined;
  cmd: readonly string[];
}

/** The option or word at args[i] taken into `into`; returns the index of the last word it used. */
const takeStepWord = (command: InScriptCommand, args: readonly string[], i: number, into: Partial<StepArgs>): number => {
  const a = args[i] as string;
  if (a === "--label") {
    if (i + 1 >= args.length) throw usageError(command, "--label needs a value");
    into.label = args[i + 1];
    return i + 1;
  }
  if (a.startsWith("--label=")) into.label = a.slice("--label=".length);
  else if (a.startsWith("-") && a.length > 1) throw usageError(command, `unknown option ${a}`);
  else if (into.name === undefined) into.name = a;
  else throw usageError(command, `unexpected argument (put the command after --): ${a}`);
  return i;
};

/** Parses exactly as the native client does (cmd_step in agent-image/native/flow.c). */
const parseStepArgs = (command: InScriptCommand, args: readonly string[]): StepArgs => {
  const into: Partial<StepArgs> = {};
  for (let i = 0; i < args.length && into.cmd === undefined; i++) {
    if (args[i] === "--") into.cmd = args.slice(i + 1);
    else i = takeStepWord(command, args, i, into);
  }
  const { name, label, cmd } = into;
  if (!name) throw usageError(command, "missing step name");
  if (cmd === undefined) throw usageError(command, "missing -- before the command");
  if (cmd.length === 0) throw usageError(command, "missing command after --");
  return { name, label, cmd };
};

export interface StepOutcome {
  /** The exit status. */
  code: number;
  /** The step has a result: a replayed record, or a command that ran and whose record was answered. */
  ended: boolean;
  /** The next free request id on the connection. */
  nextId: number;
}

/**
 * A step on an open connection (run_step in flow.c): `step` with request id `id`, and for a new
 * step the command and then `step.complete` with id + 1.
 */
export const runStep = async (connection: AgentConnection, step: StepArgs, env: ClientEnv, id = 1): Promise<StepOutcome> => {
  const answer = await connection.call({ id, op: "step", name: step.name, label: step.label });
  if (!answer.ok || answer.replay) return { code: applyResponse(answer, 0), ended: answer.ok, nextId: id + 1 };
  const { position, idempotencyKey } = answer;
  if (position === undefined) throw new ClientError(["error: malformed response from the agent: position"]);
  if (idempotencyKey === undefined) throw new ClientError(["error: malformed response from the agent: idempotency_key"]);
  applyOutput(answer);
  // Loaded only here: a replayed step never starts a process (node:child_process costs start-up).
  const { runStepBody, STEP_OUTPUT_LIMIT } = await import("./step-body.js");
  const body = await runStepBody(step.cmd, env, idempotencyKey);
  const done = await connection.call({
    id: id + 1,
    op: "step.complete",
    position,
    stdout_b64: body.kept.toString("base64"),
    exit: body.exit,
    overflow_bytes: body.total > STEP_OUTPUT_LIMIT ? body.total : undefined,
  });
  return { code: applyResponse(done, body.exit), ended: true, nextId: id + 2 };
};

export const stepCommand: InScriptCommand = {
  name: "step",
  usage: "flow step <name> [--label <text>] -- <cmd...>",
  summary: "Runs <cmd> once, records its stdout and exit code, and returns the record on replay.",
  example: 'flow step build --label "Build the site" -- make all',
  async run(args, env) {
    const step = parseStepArgs(this, args);
    const connection = await AgentConnection.open(agentSocket(env, this.name));
    try {
      return (await runStep(connection, step, env)).code;
    } finally {
      connection.close();
    }
  },
};
