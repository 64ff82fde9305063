import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { openCapturePipe } from "./capture-pipe.js";
import { startScript } from "./script-runner.js";

/** Runs `script`; `onStarted` gets the script and its stdout so far. */
const run = async (
  script: string,
  opts: { onStarted?: (s: ReturnType<typeof startScript>, stdout: () => string) => Promise<void> } = {},
) => {
  const dir = await mkdtemp(join(tmpdir(), "fa-test-"));
  try {
    const pipe = openCapturePipe(join(dir, "out.fifo"));
    const s = startScript({ command: "bash", args: ["-c", script], cwd: dir, env: { PATH: "/usr/bin:/bin" }, stdoutFd: pipe.writeFd });
    pipe.closeWriteEnd();
    let stdout = "";
    let stderr = "";
    pipe.reader.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    s.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const ended = new Promise((r) => pipe.reader.once("close", r));
    await opts.onStarted?.(s, () => stdout);
    const exit = await s.exited;
    await ended;
    return { exit, stdout, stderr, ino: pipe.ino, script: s };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
};

void test("a client in the script sees the capture pipe's inode as fstat(1).st_ino", async () => {
  const r = await run("stat -L -c %i /proc/self/fd/1");
  assert.equal(r.exit.exitCode, 0);
  assert.equal(Number(r.stdout.trim()), r.ino);
});

void test("a command substitution's stdout is not the capture pipe", async () => {
  const r = await run('x=$(stat -L -c %i /proc/self/fd/1); echo "$x"');
  assert.notEqual(Number(r.stdout.trim()), r.ino);
});

void test("stdout and stderr arrive on their own streams and the exit code is reported", async () => {
  const r = await run("echo out; echo err >&2; exit 3");
  assert.deepEqual([r.stdout, r.stderr, r.exit.exitCode], ["out\n", "err\n", 3]);
});

void test("the script runs in a process group of its own", async () => {
  const r = await run("ps -o pgid= -p $$");
  assert.equal(Number(r.stdout.trim()), r.script.pid);
});

void test("a death by signal is reported as 128 + the signal number", async () => {
  const r = await run("kill -TERM $$");
  assert.equal(r.exit.exitCode, 143);
  assert.equal(r.exit.signal, "SIGTERM");
});

void test("terminating the group ends the script's background children too", async () => {
  let child = 0;
  const r = await run("trap '' TERM; sleep 30 & echo $!; wait", {
    onStarted: async (s, stdout) => {
      // The child's pid is printed after the trap is set and the child started.
      while (!stdout().endsWith("\n")) await sleep(10);
      await s.terminate(300);
    },
  });
  child = Number(r.stdout.trim());
  assert.ok(child > 0);
  assert.equal(r.exit.signal, "SIGKILL", "the script ignored SIGTERM and was killed after the grace");
  // A killed child may stay a zombie for a moment until init reaps it.
  const gone = async (): Promise<boolean> => {
    for (let i = 0; i < 100; i++) {
      try {
        process.kill(child, 0);
      } catch {
        return true;
      }
      await sleep(20);
    }
    return false;
  };
  assert.ok(await gone(), `background child ${child} is still alive`);
});

void test("a missing interpreter fails the start with 127 and says which", async () => {
  const dir = await mkdtemp(join(tmpdir(), "fa-test-"));
  try {
    const pipe = openCapturePipe(join(dir, "out.fifo"));
    const s = startScript({ command: "no-such-interpreter-xyz", args: [], cwd: dir, env: {}, stdoutFd: pipe.writeFd });
    pipe.closeWriteEnd();
    pipe.reader.destroy();
    const exit = await s.exited;
    assert.equal(exit.exitCode, 127);
    assert.match(exit.startError ?? "", /cannot start "no-such-interpreter-xyz"/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

void test("a variable with a NUL byte ends the start with 127 and a message that names the variable, never its value", async () => {
  const dir = await mkdtemp(join(tmpdir(), "fa-test-"));
  try {
    for (const stdoutFd of [undefined, "pipe"] as const) {
      const pipe = stdoutFd === "pipe" ? openCapturePipe(join(dir, "out.fifo")) : undefined;
      const s = startScript({
        command: "bash",
        args: ["-c", "echo ran"],
        cwd: dir,
        env: { PATH: "/usr/bin:/bin", DEPLOY_KEY: "hunter2\u0000tail" },
        stdoutFd: pipe?.writeFd,
      });
      pipe?.closeWriteEnd();
      let out = "";
      for await (const chunk of s.stdout ?? pipe!.reader) out += String(chunk);
      for await (const chunk of s.stderr) out += String(chunk);
      const exit = await s.exited;
      assert.equal(s.pid, undefined);
      assert.equal(exit.exitCode, 127);
      assert.equal(out, "");
      assert.match(
        exit.startError ?? "",
        /^cannot start "bash": environment variable "DEPLOY_KEY" holds a NUL byte, which a process environment cannot hold$/,
      );
      assert.equal(s.signalGroup(0), false);
      await s.terminate(10);
    }
    const badArg = await startScript({ command: "bash", args: ["-c", "x\u0000hunter2"], cwd: dir, env: {} }).exited;
    assert.equal(badArg.exitCode, 127);
    assert.match(badArg.startError ?? "", /an argument or the directory holds a NUL byte/);
    assert.ok(!badArg.startError?.includes("hunter2"));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
