/**
 * The job's scratch directory (mode 0700, under FLOW_AGENT_WORKDIR): the run's recorded source,
 * `input.json` (for FLOW_INPUT_FILE: the claim's event envelope, else the trigger's), the agent
 * socket and the capture pipe.
 * It is the script's working directory and is removed when the job ends.
 *
 * The file work is synchronous on purpose: a handful of tiny files in a directory of the agent's
 * own, one job at a time. Each asynchronous call went through the thread pool (a hand-off, a
 * wake-up and a promise each), which cost more CPU than the system call it carried.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
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

const RESERVED = new Set(["input.json", "agent.sock", ".flow-stdout"]);

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

export const prepareScratchDir = (workdir: string, content: ScratchContent): Promise<ScratchDir> => {
  try {
    return Promise.resolve(prepareScratchDirSync(workdir, content));
  } catch (err) {
    return Promise.reject(err as Error);
  }
};

const prepareScratchDirSync = (workdir: string, content: ScratchContent): ScratchDir => {
  mkdirSync(workdir, { recursive: true, mode: 0o700 });
  const dir = mkdtempSync(join(workdir, "j-")); // mkdtemp makes it 0700
  const extraDirs: string[] = [];
  const removeNow = (): void => {
    for (const d of [dir, ...extraDirs]) rmSync(d, { recursive: true, force: true });
  };
  const remove = (): Promise<void> => {
    try {
      removeNow();
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err as Error);
    }
  };
  try {
    const scriptPath = join(dir, scriptFileName(content.filename));
    writeFileSync(scriptPath, content.source, { mode: 0o700 });
    const inputPath = join(dir, "input.json");
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
    removeNow();
    throw err;
  }
};
