/**
 * `flow spawn` in a local run: the child is another local run, started in the background as its
 * own `flow run` process (detached: it outlives its parent, as an independent run should), in the
 * parent's working directory. Its source is written into the child's run directory (removed with
 * it); its output goes to `<state>/logs/<run-id>.log`, since the parent's terminal may be long
 * gone when it ends. Tags mean nothing locally and are ignored.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, openSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { FlowError, newId } from "@flowsvc/core";
import { localRunDir } from "./local-run-dir.js";

export interface SpawnRequest {
  readonly source: string;
  readonly filename: string;
  readonly as: string;
}

export interface LocalSpawnOptions {
  readonly stateDir: string;
  readonly cwd: string;
  /** The environment the child `flow run` starts with (it finds the same state directory in it). */
  readonly env: Readonly<Record<string, string | undefined>>;
}

export interface SpawnedRun {
  readonly runId: string;
  readonly logFile: string;
}

/** The user CLI's entry: this file is cli/dist/local/local-spawn.js, the binary cli/dist/bin/flow.js. */
const FLOW_BIN = fileURLToPath(new URL("../bin/flow.js", import.meta.url));

/** A safe file name for the child's source: the last segment of the given one. */
const sourceName = (filename: string): string => {
  const base = filename.replaceAll("\\", "/").split("/").pop() ?? "";
  return base === "" || base === "." || base === ".." ? "script" : base.replace(/\0/g, "");
};

/** Starts `flow run <file> --run-id <id>` detached, output to `fd`, and records its pid. */
const startChild = async (
  spec: { pidFile: string; file: string; runId: string; fd: number },
  options: LocalSpawnOptions,
): Promise<void> => {
  const { pidFile, file, runId, fd } = spec;
  const child = spawn(process.execPath, [FLOW_BIN, "run", file, "--run-id", runId], {
    cwd: options.cwd,
    env: { ...options.env },
    detached: true,
    stdio: ["ignore", fd, fd],
  });
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", () => resolve());
    child.once("error", (err) => reject(new FlowError("internal", `cannot start the spawned local run: ${err.message}`, { cause: err })));
  });
  if (child.pid !== undefined) await writeFile(pidFile, `${child.pid}\n`, { mode: 0o600 });
  child.unref();
};

export const spawnLocalRun = async (req: SpawnRequest, options: LocalSpawnOptions): Promise<SpawnedRun> => {
  if (req.as !== "script") {
    throw new FlowError(
      "invalid_argument",
      `flow spawn --as ${req.as}: a local run spawns scripts only; a pipeline runs on a flowsvc server`,
      {
        hint: "spawn a script (the default), or flow submit the parent to a server",
      },
    );
  }
  const runId = newId("run", Date.now(), randomBytes(10));
  const run = localRunDir(options.stateDir, runId);
  if (!run) throw new FlowError("internal", `newId made an invalid run id ${runId}`);
  const sourceDir = join(run.dir, "source");
  await mkdir(sourceDir, { recursive: true, mode: 0o700 });
  const file = join(sourceDir, sourceName(req.filename));
  await writeFile(file, req.source, { mode: 0o700 });
  const logsDir = join(options.stateDir, "logs");
  await mkdir(logsDir, { recursive: true, mode: 0o700 });
  const logFile = join(logsDir, `${runId}.log`);
  const fd = openSync(logFile, "a", 0o600);
  try {
    await startChild({ pidFile: run.pidFile, file, runId, fd }, options);
  } catch (err) {
    await rm(run.dir, { recursive: true, force: true });
    throw err;
  } finally {
    closeSync(fd);
  }
  return { runId, logFile };
};
