/**
 * The on-disk presence of a local run: `<state>/runs/<run-id>/` with `pid` (the `flow run`
 * process) and `signals/` (the spool `flow signal` writes into). It exists exactly while the run
 * does: made before the script starts, removed when the run ends. A directory whose `pid` names
 * no live process is left over from a killed `flow run` and counts as ended. A directory made
 * beforehand may hold `journal.json` (what earlier passes recorded, JournalEntry[]): the run
 * replays it under core's rules, as an agent replays the journal a server hands it.
 */
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { FlowError, ID_PATTERN, JournalEntrySchema, describeIssues } from "@flowsvc/core";
import type { JournalEntry } from "@flowsvc/core";
import { localRunPath } from "./config.js";
import { isProcessAlive } from "./local-files.js";

export interface LocalRunDir {
  readonly runId: string;
  readonly dir: string;
  readonly signalsDir: string;
  /** Signals a wait took, kept until the run ends. */
  readonly takenDir: string;
  readonly pidFile: string;
  /** The recorded journal a resumed run replays (absent for a new run). */
  readonly journalFile: string;
}

export type LocalRunPresence = "running" | "ended" | "none";

/** `<state>/runs/<run-id>`; undefined for a text that is not a run id (never a path outside). */
export const localRunDir = (stateDir: string, runId: string): LocalRunDir | undefined => {
  if (!ID_PATTERN.test(runId) || !runId.startsWith("run-")) return undefined;
  const dir = localRunPath(stateDir, runId);
  return {
    runId,
    dir,
    signalsDir: join(dir, "signals"),
    takenDir: join(dir, "taken"),
    pidFile: join(dir, "pid"),
    journalFile: join(dir, "journal.json"),
  };
};

/**
 * Makes the run's directory (a spawned child's parent made it already, to hand over the source)
 * and writes the pid. A run id whose directory names another live process is refused.
 */
export const createLocalRunDir = async (run: LocalRunDir, pid: number): Promise<void> => {
  const holder = Number((await readFile(run.pidFile, "utf8").catch(() => "")).trim());
  if (holder > 0 && holder !== pid && isProcessAlive(holder)) {
    throw new FlowError("conflict", `local run ${run.runId} is already running (pid ${holder})`);
  }
  await mkdir(run.signalsDir, { recursive: true, mode: 0o700 });
  await mkdir(run.takenDir, { recursive: true, mode: 0o700 });
  await writeFile(run.pidFile, `${pid}\n`, { mode: 0o600 });
};

export const removeLocalRunDir = async (run: LocalRunDir): Promise<void> => {
  await rm(run.dir, { recursive: true, force: true });
};

/**
 * Whether the run is on this machine and alive. A directory without a `pid` is a spawned child
 * whose `flow run` is starting (its parent made the directory to hand it the source).
 */
export const localRunPresence = async (run: LocalRunDir): Promise<LocalRunPresence> => {
  try {
    await stat(run.dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "none";
    throw err;
  }
  let pidText: string;
  try {
    pidText = await readFile(run.pidFile, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "running";
    throw err;
  }
  return isProcessAlive(Number(pidText.trim())) ? "running" : "ended";
};

const JournalFileSchema = z.array(JournalEntrySchema);

/** The journal the run directory was handed (`journal.json`), or [] when it has none. */
export const readLocalJournal = async (run: LocalRunDir): Promise<JournalEntry[]> => {
  let text: string;
  try {
    text = await readFile(run.journalFile, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text) as unknown;
  } catch (err) {
    throw new FlowError("invalid_argument", `${run.journalFile} is not valid JSON (${(err as Error).message})`, { cause: err });
  }
  const parsed = JournalFileSchema.safeParse(raw);
  if (!parsed.success)
    throw new FlowError("invalid_argument", `${run.journalFile} is not a journal: ${describeIssues(parsed.error.issues)}`);
  return parsed.data;
};
