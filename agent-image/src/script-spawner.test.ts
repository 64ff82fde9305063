/**
 * The worker's script spawner (native/spawner.c through script-spawner.ts) against Node's spawn
 * (script-runner.ts's startScript): the same script must see and report the same things either way.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openCapturePipe } from "./capture-pipe.js";
import { startScript, startScriptWith, type RunningScript, type StartScriptOptions } from "./script-runner.js";
import { ScriptSpawner } from "./script-spawner.js";

let spawner: ScriptSpawner | undefined;
let dir: string;
before(async () => {
  spawner = ScriptSpawner.create();
  dir = await mkdtemp(join(tmpdir(), "fa-spawner-"));
});
after(async () => {
  await spawner?.close();
  await rm(dir, { recursive: true, force: true });
});

type Way = "node" | "spawner";

const run = async (way: Way, start: Omit<StartScriptOptions, "stdoutFd" | "cwd">) => {
  const pipe = openCapturePipe(join(dir, `out-${way}`));
  const options = { ...start, cwd: dir, stdoutFd: pipe.writeFd };
  let script: RunningScript;
  if (way === "spawner") {
    const stderrPipe = openCapturePipe(join(dir, `err-${way}`));
    const s = await startScriptWith(spawner!, { ...options, stdoutPath: `/proc/${process.pid}/fd/${pipe.writeFd}`, stderrPipe });
    assert.ok(s, "the spawner is alive");
    script = s;
  } else {
    script = startScript(options);
  }
  pipe.closeWriteEnd();
  let stdout = "";
  let stderr = "";
  pipe.reader.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  script.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const ended = Promise.all([new Promise((r) => pipe.reader.once("close", r)), new Promise((r) => script.stderr.once("close", r))]);
  const exit = await script.exited;
  await ended;
  return { exit, stdout: stdout.replaceAll(`out-${way}`, "out").replaceAll(`err-${way}`, "err"), stderr, pid: script.pid };
};

const both = async (start: Omit<StartScriptOptions, "stdoutFd" | "cwd">) => {
  const viaNode = await run("node", start);
  const viaSpawner = await run("spawner", start);
  return { viaNode, viaSpawner };
};

const bash = (script: string, env: Record<string, string> = { PATH: "/usr/bin:/bin" }) => ({ command: "bash", args: ["-c", script], env });

void test("the spawner was built and starts (npm run build compiles it where a C compiler is)", () => {
  assert.ok(spawner, "agent-image/libexec/flow-spawner");
});

void test("exit codes, deaths by signal (128 + n), stdout and stderr are what Node's spawn reports", async () => {
  for (const script of ["echo out; echo err >&2; exit 3", "exit 0", "kill -TERM $$", "kill -KILL $$", "exit 255"]) {
    const { viaNode, viaSpawner } = await both(bash(script));
    assert.deepEqual(
      { exit: viaSpawner.exit, stdout: viaSpawner.stdout, stderr: viaSpawner.stderr },
      { exit: viaNode.exit, stdout: viaNode.stdout, stderr: viaNode.stderr },
      script,
    );
  }
});

void test("the script leads its own process group, reads /dev/null, holds only fds 0-2 and no blocked or ignored signal", async () => {
  const probe = bash(
    'echo "pgid=$(ps -o pgid= -p $$ | tr -d " ")"; echo "in=$(readlink /proc/$$/fd/0)"; ls /proc/$$/fd | sort -n | tr "\\n" " "; echo; grep -E "^Sig(Blk|Ign)" /proc/$$/status',
  );
  const { viaNode, viaSpawner } = await both(probe);
  assert.match(viaSpawner.stdout, new RegExp(`^pgid=${viaSpawner.pid}$`, "m"));
  assert.match(viaSpawner.stdout, /^in=\/dev\/null$/m);
  // Descriptors: bash keeps its own ones high (>= 10); below that the script holds 0-2 only, none
  // of the agent's. Node's spawn is no reference here: it passes on whatever descriptor its parent
  // holds without close-on-exec (a test runner's, a CI shell's), which the spawner closes.
  const fds = (out: string): number[] =>
    (out.split("\n").find((l) => /^\d/.test(l)) ?? "")
      .trim()
      .split(" ")
      .map(Number)
      .filter((fd) => fd < 10);
  assert.deepEqual(fds(viaSpawner.stdout), [0, 1, 2], viaSpawner.stdout);
  const state = (out: string): string[] => out.split("\n").filter((l) => /^(in=|Sig)/.test(l));
  assert.deepEqual(state(viaSpawner.stdout), state(viaNode.stdout), "stdin and signal state as Node's spawn leaves them");
});

void test("the environment is exactly the one given (no variable of the agent's, hostile names and values kept as given)", async () => {
  const env = { PATH: "/usr/bin:/bin", LD_PRELOAD: "/nonexistent/evil.so", "WEIRD NAME": "a=b=c", EMPTY: "", UNI: "héllo \u{1F600}" };
  const { viaNode, viaSpawner } = await both({ command: "env", args: ["-0"], env });
  assert.equal(viaSpawner.stdout, viaNode.stdout);
  assert.deepEqual(
    viaSpawner.stdout.split("\0").filter(Boolean).sort(),
    Object.entries(env)
      .map(([k, v]) => `${k}=${v}`)
      .sort(),
  );
});

void test("a command not on the env's PATH, a NUL in a variable or argument: the same refusal as Node's spawn, nothing runs", async () => {
  const starts: Array<Omit<StartScriptOptions, "stdoutFd" | "cwd">> = [
    { command: "no-such-interpreter-xyz", args: ["x"], env: { PATH: "/usr/bin:/bin" } },
    { command: "bash", args: ["-c", "echo hi"], env: { PATH: "/nonexistent" } },
    { command: "bash", args: ["-c", "echo hi"], env: { PATH: "/usr/bin:/bin", SECRET: "a\0b" } },
    { command: "bash", args: ["-c", "echo\0hi"], env: { PATH: "/usr/bin:/bin" } },
  ];
  for (const start of starts) {
    const { viaNode, viaSpawner } = await both(start);
    assert.equal(viaSpawner.exit.exitCode, 127);
    assert.deepEqual(viaSpawner.exit, viaNode.exit, JSON.stringify(start.env));
    assert.equal(viaSpawner.pid, undefined);
    assert.equal(viaSpawner.exit.startError?.includes("a\0b"), false, "the refusal never quotes a value");
  }
});

void test("a spawner that cannot open a job's output paths (no /proc access) answers nothing started, and is not used again", async () => {
  const own = ScriptSpawner.create();
  assert.ok(own);
  try {
    const stderrPipe = openCapturePipe(join(dir, "err-unusable"));
    const s = await startScriptWith(own, {
      command: "bash",
      args: ["-c", "touch ran"],
      cwd: dir,
      env: { PATH: "/usr/bin:/bin" },
      stdoutPath: join(dir, "no-such-dir", "out"),
      stderrPipe,
    });
    stderrPipe.reader.destroy();
    assert.equal(s, undefined, "the caller starts the script itself");
    assert.equal(own.alive, false);
    assert.equal(existsSync(join(dir, "ran")), false, "nothing ran");
  } finally {
    await own.close();
  }
});

/** The parent pid of a live or zombie process from /proc (field 4 of stat, after the command's closing parenthesis), or undefined once it is reaped. */
const parentOf = (pid: number): number | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
};

void test("a process a script leaves behind is the spawner's to reap (its subreaper), never a zombie of pid 1", async () => {
  const { exit, stdout } = await run("spawner", bash("sleep 30 > /dev/null 2>&1 < /dev/null & echo $!"));
  assert.equal(exit.exitCode, 0);
  const orphan = Number(stdout.trim());
  assert.ok(orphan > 0, stdout);
  // The script has exited (run waited for it), so the orphan was re-parented already.
  assert.equal(parentOf(orphan), spawner!.pid, "re-parented to the spawner");
  process.kill(orphan, "SIGKILL");
  // Reaped: /proc/<pid> goes once the spawner has waited for it (a zombie keeps it).
  const deadline = Date.now() + 10_000;
  while (parentOf(orphan) !== undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  assert.equal(parentOf(orphan), undefined, "the orphan was reaped");
});
