import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { inputEnvelope, prepareScratchDir, scriptFileName } from "./scratch-dir.js";

void test("the scratch dir is private and holds the recorded source and the input envelope", async () => {
  const root = await mkdtemp(join(tmpdir(), "fa-scratch-"));
  try {
    const s = await prepareScratchDir(join(root, "work"), { filename: "ci/build.sh", source: "echo hi\n", trigger: {} });
    assert.equal((await stat(s.dir)).mode & 0o777, 0o700);
    assert.equal(s.scriptPath, join(s.dir, "build.sh"));
    assert.equal(await readFile(s.scriptPath, "utf8"), "echo hi\n");
    assert.deepEqual(JSON.parse(await readFile(s.inputPath, "utf8")), { type: "manual", event: null, payload: null });
    assert.equal(dirname(s.socketPath), s.dir);
    await s.remove();
    await assert.rejects(stat(s.dir), { code: "ENOENT" });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

void test("a workdir too deep for a Unix socket path gets the socket in a short directory", async () => {
  const root = await mkdtemp(join(tmpdir(), "fa-scratch-"));
  try {
    const s = await prepareScratchDir(join(root, "x".repeat(120)), { filename: "a.sh", source: "", trigger: {} });
    assert.ok(Buffer.byteLength(s.socketPath) <= 100);
    await s.remove();
    await assert.rejects(stat(dirname(s.socketPath)), { code: "ENOENT" });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

void test("the script file name cannot leave the scratch dir or shadow the agent's files", () => {
  assert.equal(scriptFileName("../../etc/passwd"), "passwd");
  assert.equal(scriptFileName(".."), "script");
  assert.equal(scriptFileName(""), "script");
  assert.equal(scriptFileName("input.json"), "script");
  assert.equal(scriptFileName("deploy.py"), "deploy.py");
});

void test("the input envelope keeps the trigger's fields over the defaults", () => {
  assert.deepEqual(inputEnvelope({ type: "push", sha: "abc", payload: { a: 1 } }), {
    type: "push",
    event: null,
    payload: { a: 1 },
    sha: "abc",
  });
});

void test("a claim's input (a handler run's event envelope) is written whole as input.json instead of the trigger's", async () => {
  const root = await mkdtemp(join(tmpdir(), "fa-scratch-"));
  try {
    const input = {
      type: "deploy.done",
      event: "evt-1",
      key: "acme/web",
      payload: { nested: { list: [1, "two", null] }, big: "x".repeat(100_000) },
    };
    const s = await prepareScratchDir(join(root, "work"), {
      filename: "h.sh",
      source: "",
      trigger: { type: "deploy.done", event: "evt-1" },
      input,
    });
    assert.deepEqual(JSON.parse(await readFile(s.inputPath, "utf8")), input);
    const none = await prepareScratchDir(join(root, "work"), {
      filename: "h.sh",
      source: "",
      trigger: { type: "spawn", parent: "run-1" },
      input: null,
    });
    assert.deepEqual(JSON.parse(await readFile(none.inputPath, "utf8")), { type: "spawn", event: null, payload: null, parent: "run-1" });
    await s.remove();
    await none.remove();
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

void test("a job that owns its workdir (a worker's) puts its files there, and refuses one that exists already", async () => {
  const root = await mkdtemp(join(tmpdir(), "fa-scratch-"));
  try {
    const own = join(root, "agt-1");
    const s = await prepareScratchDir(own, { filename: "a.sh", source: "echo hi\n", trigger: {} }, true);
    assert.equal(s.dir, own, "no nested directory");
    assert.equal((await stat(own)).mode & 0o777, 0o700);
    assert.equal(await readFile(join(own, "a.sh"), "utf8"), "echo hi\n");
    await s.remove();
    assert.ok((await stat(own)).isDirectory(), "the owner (the worker) removes it, once");
    // A directory that exists already is not this job's alone: its files go into a new one inside.
    const again = await prepareScratchDir(own, { filename: "a.sh", source: "", trigger: {} }, true);
    assert.equal(dirname(again.dir), own);
    assert.match(again.dir, /\/j-[^/]+$/);
    await again.remove();
    await assert.rejects(stat(again.dir), { code: "ENOENT" });
    assert.equal(scriptFileName("script.pgid"), "script", "the script cannot take the launcher's pgid file's name");
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
