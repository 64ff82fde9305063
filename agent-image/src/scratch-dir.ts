/**
 * The job's scratch directory (mode 0700, under FLOW_AGENT_WORKDIR): the run's recorded source,
 * `input.json` (for FLOW_INPUT_FILE: the claim's event envelope, else the trigger's), the agent
 * socket and the capture pipe.
 * It is the script's working directory and is removed when the job ends.
 */
import { mkdirSync, mkdtempSync, unlinkSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";

export interface ScratchDir {
  readonly dir: string;
  readonly scriptPath: string;
  readonly inputPath: string;
  readonly socketPath: string;
  readonly capturePath: string;
  remove(): Promise<void>;
}

export interface ScratchContent {
  readonly filename: string;
  readonly source: string;
  readonly trigger: Readonly<Record<string, unknown>>;
  /** The whole event envelope of a handler run (the claim's `input`); the trigger's otherwise. */
  readonly input?: unknown;
}

/** A Unix socket path must fit in sun_path (108 bytes with the NUL on Linux); keep a margin. */
const MAX_SOCKET_PATH = 100;

const RESERVED = new Set(["input.json", "agent.sock", ".flow-stdout", "script.pgid"]);

/** The script's file name: the recorded filename's last segment, or `script` if it has none. */
export const scriptFileName = (filename: string): string => {
  const name = basename(filename.replaceAll("\\", "/")).replace(/[\0]/g, "");
  return name === "" || name === "." || name === ".." || RESERVED.has(name) ? "script" : name;
};

/** The envelope a script reads from FLOW_INPUT_FILE: `{type, event, payload, ...}`; manual by default. */
export const inputEnvelope = (trigger: Readonly<Record<string, unknown>>): Record<string, unknown> => ({
  type: "manual",
  event: null,
  payload: null,
  ...trigger,
});

/**
 * Where the job's files go: a new `j-` directory under `workdir` (which other jobs may share: a
 * Pod's FLOW_AGENT_WORKDIR, the system's temporary directory), or, with `ownsWorkdir`, `workdir`
 * itself, made here (0700) and refused if it exists already: a worker's job directory, named for
 * this dispatch alone and removed by the worker after the job (the nested directory would only
 * cost a mkdtemp and a second removal per job).
 *
 * The directory and its two files are made with synchronous calls, on purpose: each is one small
 * system call (tens of microseconds), where the promise API sends every step (mkdir; open, write
 * and close of each file) through libuv's thread pool and back, two thread wake-ups apiece, seven
 * round trips between a claim's answer and the script's start (strace of a worker agent). An
 * agent serves its jobs one at a time, so nothing waits behind them.
 */
const makeJobDir = (workdir: string, ownsWorkdir: boolean): { dir: string; own: boolean } => {
  if (ownsWorkdir) {
    try {
      mkdirSync(workdir, { mode: 0o700 });
      return { dir: workdir, own: true };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err; // not fresh: fall back to a directory of its own
    }
  } else {
    mkdirSync(workdir, { recursive: true, mode: 0o700 });
  }
  return { dir: mkdtempSync(join(workdir, "j-")), own: false }; // mkdtemp makes it 0700
};

export const prepareScratchDir = async (workdir: string, content: ScratchContent, ownsWorkdir = false): Promise<ScratchDir> => {
  const { dir, own } = makeJobDir(workdir, ownsWorkdir);
  const extraDirs: string[] = [];
  const scriptPath = join(dir, scriptFileName(content.filename));
  const inputPath = join(dir, "input.json");
  // The job's own workdir is removed by its owner (the worker), once, after the job: the files made
  // here go now, so that an empty directory is one rmdir there (a recursive removal is an lstat, a
  // failed rmdir, a readdir and an lstat per entry). Whatever the script left or changed is the
  // owner's recursive fallback's. The two unlinks are synchronous for the reason makeJobDir says;
  // a directory of unknown size (what a script may have filled) is removed without blocking.
  const remove = async (): Promise<void> => {
    if (own)
      for (const f of [scriptPath, inputPath])
        try {
          unlinkSync(f);
        } catch {
          // gone already (the script removed it), or never written
        }
    for (const d of own ? extraDirs : [dir, ...extraDirs]) await rm(d, { recursive: true, force: true });
  };
  try {
    writeFileSync(scriptPath, content.source, { mode: 0o700 });
    const input = content.input ?? inputEnvelope(content.trigger);
    writeFileSync(inputPath, JSON.stringify(input), { mode: 0o600 });
    let socketPath = join(dir, "agent.sock");
    if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH) {
      const short = mkdtempSync(join(tmpdir(), "fa-"));
      extraDirs.push(short);
      socketPath = join(short, "agent.sock");
    }
    return { dir, scriptPath, inputPath, socketPath, capturePath: join(dir, ".flow-stdout"), remove };
  } catch (err) {
    await remove();
    throw err;
  }
};
