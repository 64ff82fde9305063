import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openCapturePipe, type CapturePipe } from "./capture-pipe.js";

/** All the reader gets until it ends (every writer closed) and closes. */
const readAll = (pipe: CapturePipe): Promise<string> =>
  new Promise((resolve) => {
    let text = "";
    pipe.reader.setEncoding("utf8").on("data", (d: string) => (text += d));
    pipe.reader.once("close", () => resolve(text));
  });

/** A child whose stdout is the pipe's write end: it prints what it reads on stdin, then exits. */
const echoChild = (pipe: CapturePipe) => {
  const child = spawn("bash", ["-c", 'while read -r line; do echo "$line"; done'], { stdio: ["pipe", pipe.writeFd, "ignore"] });
  pipe.closeWriteEnd();
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  return { child, exited, say: (text: string) => child.stdin!.end(text) };
};

void test("a capture pipe whose reader saw end-of-file serves the next job: same inode, only the new writer's bytes, no file left", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "fa-pipe-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const first = openCapturePipe(join(dir, "a.fifo"));
  const firstText = readAll(first);
  const a = echoChild(first);
  a.say("job one\n");
  await a.exited;
  assert.equal(await firstText, "job one\n");

  const second = openCapturePipe(join(dir, "b.fifo"));
  assert.equal(second.ino, first.ino);
  assert.equal(existsSync(join(dir, "a.fifo")) || existsSync(join(dir, "b.fifo")), false);
  const secondText = readAll(second);
  const b = echoChild(second);
  b.say("job two\n");
  await b.exited;
  assert.equal(await secondText, "job two\n");
});

void test("a capture pipe cut off while a leftover process holds it is not reused: the leftover never writes into the next job's log", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "fa-pipe-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const first = openCapturePipe(join(dir, "a.fifo"));
  const leftover = echoChild(first);
  t.after(() => leftover.child.kill("SIGKILL"));
  const cut = new Promise((r) => first.reader.once("close", r));
  first.reader.destroy(); // the job ended with the leftover still holding the write end
  await cut;

  const next = openCapturePipe(join(dir, "b.fifo"));
  assert.notEqual(next.ino, first.ino);
  const nextText = readAll(next);
  const own = echoChild(next);
  leftover.say("leaked\n"); // writes into the old FIFO, which nobody reads any more
  await leftover.exited;
  own.say("mine\n");
  await own.exited;
  assert.equal(await nextText, "mine\n");
});
