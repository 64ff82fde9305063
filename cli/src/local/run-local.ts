/**
 * `flow run <file>`: one local run, start to end. The agent's job runner (runJob) runs the file in
 * place, in the current directory, against the in-process LocalBackend: the same socket, the same
 * in-script client, the same sealed environment as on an agent (plus XDG_STATE_HOME when set, so
 * the script's own `flow signal` and `flow spawn` find this machine's local runs), and no server.
 *
 * The run exists on disk as `<state>/runs/<run-id>/` (local-run-dir.ts) while it runs; that is
 * what `flow signal <run-id>` finds. Ctrl-C, SIGTERM and SIGHUP end the script's process group and
 * the run (exit 130, 143, 129); a `flow run` that exits any other way (its stdout closed) still
 * ends the script's group on the way out.
 */
import { randomBytes } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { access } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { constants as osConstants } from "node:os";
import { FlowError, ID_PATTERN, newId, pickInterpreter } from "@flowsvc/core";
import { composeActivityEnv, runJob } from "@flowsvc/agent";
import { localStateDir } from "./config.js";
import type { LocalEnvironment } from "./config.js";
import { LocalBackend } from "./local-backend.js";
import { createLocalRunDir, localRunDir, readLocalJournal, removeLocalRunDir } from "./local-run-dir.js";
import type { LocalRunDir } from "./local-run-dir.js";
import { terminalDiagnostics } from "./print-local.js";
import type { LocalTerminal } from "./print-local.js";
import { isGraphSubmit, isPipelineSubmit, shownFile } from "../document-kind.js";
import { readSource } from "../read-source.js";

export interface LocalRunOptions {
  readonly file: string;
  /** `--interpreter`: overrides the pick by extension. */
  readonly interpreter?: string;
  /** `--env NAME=VALUE` values. */
  readonly env: Readonly<Record<string, string>>;
  /** The run id to use (a spawned child's, chosen by its parent); new when unset. */
  readonly runId?: string;
  /** The working directory: the script runs here. */
  readonly cwd: string;
  /** The user's environment: the state directory, and the passthrough part the script gets. */
  readonly processEnv: LocalEnvironment;
  readonly terminal: LocalTerminal;
}

const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/**
 * After the script exits its group is ended at once, so its output is at EOF within milliseconds;
 * at a terminal, a process that left the group and still holds the output is waited for 250 ms,
 * not the agent's 1 s.
 */
const LOCAL_TIMINGS = { drainMs: 250 };

/** The in-script `flow` client the agent puts first on PATH (built by scripts/build-native.mjs). */
const inScriptClientDir = async (): Promise<string> => {
  const agentRoot = dirname(dirname(fileURLToPath(import.meta.resolve("@flowsvc/agent"))));
  for (const dir of [join(agentRoot, "bin"), join(agentRoot, "bin-node")]) {
    try {
      await access(join(dir, "flow"));
      return dir;
    } catch {
      // not built here; try the next
    }
  }
  throw new FlowError("config", `the in-script flow client is not built (no ${join(agentRoot, "bin", "flow")})`, {
    hint: "run `npm run build` in the flowsvc repository",
  });
};

const chooseRunId = (wanted: string | undefined): string => {
  if (wanted === undefined) return newId("run", Date.now(), randomBytes(10));
  if (!ID_PATTERN.test(wanted) || !wanted.startsWith("run-")) throw new FlowError("invalid_argument", `--run-id ${wanted} is not a run id`);
  return wanted;
};

/** Ends the script's group and removes the run directory when the process exits without cleaning up. */
const exitGuard = (run: LocalRunDir, pgidFile: string): (() => void) => {
  const onExit = (): void => {
    try {
      const pgid = Number(readFileSync(pgidFile, "utf8").trim());
      if (pgid > 0) process.kill(-pgid, "SIGKILL");
    } catch {
      // no script running
    }
    rmSync(run.dir, { recursive: true, force: true });
  };
  process.once("exit", onExit);
  return () => process.off("exit", onExit);
};

/**
 * A graph (.json) or a pipeline (.yaml/.yml) is a document a server runs: `flow run` would hand it
 * to bash. Refused before it is read, unless `--interpreter` says how to run the file.
 */
const refuseDocument = (file: string, interpreter: string | undefined): void => {
  if (interpreter !== undefined) return;
  const kind = isPipelineSubmit(file, undefined) ? "a pipeline" : isGraphSubmit(file, undefined) ? "a graph" : undefined;
  if (kind === undefined) return;
  const shown = shownFile(file);
  throw new FlowError(
    "invalid_argument",
    `flow run runs scripts; ${shown} is ${kind}, which runs on a flowsvc server: flow submit ${shown}`,
    {
      hint: `check it with \`flow check ${shown}\`, then submit it with \`flow submit ${shown} --follow\` (start a server with \`flow server\`); --interpreter runs the file as a script`,
    },
  );
};

/** Runs the file; answers the exit status for `flow run` (the script's, or 128+n after a signal). */
export const runLocal = async (options: LocalRunOptions): Promise<number> => {
  refuseDocument(options.file, options.interpreter);
  const scriptPath = resolve(options.cwd, options.file);
  const source = await readSource(scriptPath);
  const interpreter = pickInterpreter(scriptPath, options.interpreter);
  const clientDir = await inScriptClientDir();
  const stateDir = localStateDir(options.processEnv);
  const runId = chooseRunId(options.runId);
  const run = localRunDir(stateDir, runId);
  if (!run) throw new FlowError("internal", `no run directory for ${runId}`);
  const { terminal } = options;
  const xdgState = options.processEnv["XDG_STATE_HOME"];
  const env = { ...(xdgState ? { XDG_STATE_HOME: xdgState } : {}), ...options.env };
  const backend = new LocalBackend({
    run,
    stateDir,
    source,
    filename: basename(scriptPath),
    file: options.file,
    interpreter,
    env,
    cwd: options.cwd,
    activityEnv: composeActivityEnv({ agentEnv: options.processEnv, claimEnv: env, clientDir }),
    spawnEnv: options.processEnv,
    journal: await readLocalJournal(run),
    output: { stdout: (t) => terminal.stdout(t), stderr: (t) => terminal.stderr(t) },
  });
  const stop = new AbortController();
  let stoppedBy: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    stoppedBy ??= signal;
    stop.abort(new FlowError("unavailable", `flow run got ${signal}`));
  };
  const pgidFile = join(run.dir, "script.pgid");
  await createLocalRunDir(run, process.pid);
  const unguard = exitGuard(run, pgidFile);
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  try {
    await terminal.stderr(`local run ${runId}\n`);
    const outcome = await runJob(backend, {
      agentId: "local",
      capabilities: [],
      workdir: run.dir,
      clientDir,
      agentEnv: options.processEnv,
      logger: terminalDiagnostics(terminal),
      stop: stop.signal,
      agentPid: process.pid,
      cwd: options.cwd,
      scriptPath,
      pgidFile,
      timings: LOCAL_TIMINGS,
    });
    const unreported = backend.unreportedActivities();
    if (unreported.length > 0)
      await terminal.stderr(`flow: the run ended with activities never collected (ended with the run): ${unreported.join(", ")}\n`);
    if (outcome.type === "finished") {
      const error = backend.finished?.error;
      if (error !== undefined && !backend.wasShown(error)) await terminal.stderr(`flow: local run ${runId}: ${error}\n`);
      return outcome.exitCode;
    }
    if (stoppedBy !== undefined) {
      await terminal.stderr(`flow: local run ${runId} stopped by ${stoppedBy}; the script was ended\n`);
      return 128 + (osConstants.signals[stoppedBy] ?? 0);
    }
    throw new FlowError("internal", `local run ${runId} ended unexpectedly (${outcome.type})`);
  } finally {
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
    await backend.close();
    await removeLocalRunDir(run);
    unguard();
  }
};
