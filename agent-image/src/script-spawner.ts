/**
 * A worker agent's scripts started by a small native process (agent-image/native/spawner.c, built
 * as agent-image/libexec/flow-spawner) instead of by Node's spawn: Node forks the agent itself (~100
 * MB), copying its page tables, and the child's exec tears them down again; on this project's
 * 2-core host that was ~2.5 ms of the agent's CPU and ~2 ms more in the child per script, against
 * ~0.05 ms from the spawner. The script is what Node's spawn would make (script-runner.ts): its own
 * process group, stdin /dev/null, the environment it is given, the command looked up on that
 * environment's PATH; stdout and stderr are FIFOs the agent reads (the spawner opens them through
 * /proc/<agent>/fd/<n>, so no descriptor is passed). Its exits come back as wait statuses.
 *
 * One spawner per worker, started at its first script. No binary (no compiler at build time), no
 * /proc, or a spawner that ended: scripts start with Node's spawn, as before.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { fileURLToPath } from "node:url";

/** Started; refused (nothing runs); or the spawner cannot serve this host (the caller starts the script itself). */
export type SpawnAnswer = { readonly pid: number } | { readonly errno: string } | { readonly unusable: string };

export interface SpawnRequest {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  readonly stdoutPath: string;
  readonly stderrPath: string;
}

interface Pending {
  readonly resolve: (answer: SpawnAnswer) => void;
  readonly onExit: (status: number | undefined) => void;
}

const errnoName = (n: number): string => Object.entries(osConstants.errno).find(([, v]) => v === n)?.[0] ?? `errno ${n}`;

export const signalName = (n: number): NodeJS.Signals | null =>
  (Object.entries(osConstants.signals).find(([, v]) => v === n)?.[0] as NodeJS.Signals | undefined) ?? null;

const DEFAULT_BINARY = fileURLToPath(new URL("../libexec/flow-spawner", import.meta.url));

export class ScriptSpawner {
  readonly #child: ChildProcess;
  readonly #starting = new Map<string, Pending>();
  readonly #running = new Map<number, (status: number | undefined) => void>();
  #nextId = 0;
  #buffered = "";
  #ended = false;
  /** It could not open a job's output FIFOs: the worker starts its scripts itself from then on. */
  #unusable = false;

  private constructor(binary: string) {
    this.#child = spawn(binary, [], { stdio: ["pipe", "pipe", "inherit"] });
    this.#child.stdout!.setEncoding("latin1");
    this.#child.stdout!.on("data", (text: string) => this.#read(text));
    this.#child.stdin!.on("error", () => this.#end());
    this.#child.once("error", () => this.#end());
    this.#child.once("exit", () => this.#end());
    // The spawner keeps a worker (or a test) alive only while a start or a script is outstanding.
    this.#child.unref();
    this.#refs();
    (this.#child.stdin as unknown as { unref?: () => void }).unref?.();
  }

  /** Its answers hold the event loop while something waits for one. */
  #refs(): void {
    const out = this.#child.stdout as unknown as { ref?: () => void; unref?: () => void };
    if (this.#starting.size + this.#running.size > 0) out.ref?.();
    else out.unref?.();
  }

  /** A spawner when this host can have one (the binary was built, /proc is there), else undefined. */
  static create(binary = DEFAULT_BINARY): ScriptSpawner | undefined {
    if (!existsSync(binary) || !existsSync(`/proc/${process.pid}/fd`)) return undefined;
    return new ScriptSpawner(binary);
  }

  get alive(): boolean {
    return !this.#ended && !this.#unusable;
  }

  /**
   * Starts a script; answers its pid, or the errno that refused it (nothing runs then). `onExit`
   * is told its raw wait status once it ends (undefined: the spawner ended first, so it is unknown).
   * The strings must hold no NUL (the caller refuses those first, as Node's spawn does).
   */
  start(request: SpawnRequest, onExit: (status: number | undefined) => void): Promise<SpawnAnswer> {
    if (this.#ended) return Promise.resolve({ errno: "ESRCH" });
    const id = String(this.#nextId++);
    const env = Object.entries(request.env).map(([k, v]) => `${k}=${v}`);
    const fields = [
      id,
      request.cwd,
      request.stdoutPath,
      request.stderrPath,
      String(request.args.length + 1),
      request.command,
      ...request.args,
    ];
    const body = Buffer.from(`${[...fields, String(env.length), ...env].join("\0")}\0`, "utf8");
    const header = Buffer.alloc(4);
    header.writeUInt32LE(body.length);
    return new Promise<SpawnAnswer>((resolve) => {
      this.#starting.set(id, { resolve, onExit });
      this.#refs();
      this.#child.stdin!.write(Buffer.concat([header, body]));
    });
  }

  /** The spawner's own pid (its scripts' parent, and the subreaper of what they leave behind). */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  #read(text: string): void {
    this.#buffered += text;
    let nl: number;
    while ((nl = this.#buffered.indexOf("\n")) !== -1) {
      const [kind, a = "", b = ""] = this.#buffered.slice(0, nl).split(" ");
      this.#buffered = this.#buffered.slice(nl + 1);
      if (kind === "X") {
        const onExit = this.#running.get(Number(a));
        this.#running.delete(Number(a));
        onExit?.(Number(b));
        continue;
      }
      const pending = this.#starting.get(a);
      this.#starting.delete(a);
      if (!pending) continue;
      if (kind === "P") {
        this.#running.set(Number(b), pending.onExit);
        pending.resolve({ pid: Number(b) });
      } else if (kind === "F") {
        this.#unusable = true;
        pending.resolve({ unusable: errnoName(Number(b)) });
      } else {
        pending.resolve({ errno: errnoName(Number(b)) });
      }
    }
    this.#refs();
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    for (const p of this.#starting.values()) p.resolve({ errno: "ESRCH" });
    for (const onExit of this.#running.values()) onExit(undefined);
    this.#starting.clear();
    this.#running.clear();
  }

  /**
   * Ends the spawner (the scripts it started run on: their groups are the job's to end) and waits
   * for it to exit, so that it is reaped here and not left to a pid 1 that may never reap it.
   */
  async close(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.#child.once("exit", () => resolve()));
    this.#child.ref();
    this.#child.stdin!.end();
    await exited;
  }
}
