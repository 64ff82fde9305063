import { test } from "node:test";
import assert from "node:assert/strict";
import type { JournalEntry } from "@flowsvc/core";
import { agentSocket, fakeBackend } from "./agent-test-kit.js";
import { idempotencyKeyFor } from "./journal-cursor.js";

/** A recorded step at `[position, name, ordinal]`. */
const done = ([position, name, ordinal]: [number, string, number], stdout: string, exit = 0): JournalEntry => ({
  position,
  kind: "step",
  name,
  ordinal,
  status: "done",
  result: { stdout_b64: Buffer.from(stdout).toString("base64"), exit },
});

void test("hello answers the agent id, protocol 2 and the capture pipe's inode", async () => {
  const a = await agentSocket([]);
  const [r] = await a.call({ v: 2, op: "hello" });
  assert.deepEqual(r, { v: 2, ok: true, agent_id: "agt-test", protocol: 2, capture_ino: 4242 });
  await a.close();
});

void test("recorded steps replay from the journal, by name and ordinal, without the server", async () => {
  const a = await agentSocket([done([0, "build", 0], "built\n"), done([1, "build", 1], "again\n", 3)]);
  const [first, second] = await a.call({ v: 2, op: "step", name: "build" }, { v: 2, op: "step", name: "build", label: "twice" });
  assert.deepEqual(first, {
    v: 2,
    ok: true,
    replay: true,
    capture_ino: 4242,
    stdout_b64: Buffer.from("built\n").toString("base64"),
    exit: 0,
  });
  assert.deepEqual(second, {
    v: 2,
    ok: true,
    replay: true,
    capture_ino: 4242,
    stdout_b64: Buffer.from("again\n").toString("base64"),
    exit: 3,
  });
  await a.close();
});

void test("a step past the journal is new, with a position and an idempotency key stable for that position", async () => {
  const a = await agentSocket([done([0, "build", 0], "x")]);
  const [, fresh] = await a.call({ v: 2, op: "step", name: "build" }, { v: 2, op: "step", name: "deploy" });
  assert.deepEqual(fresh, {
    v: 2,
    ok: true,
    replay: false,
    position: 1,
    idempotency_key: idempotencyKeyFor("run-test", 1),
    capture_ino: 4242,
  });
  assert.equal(idempotencyKeyFor("run-test", 1), idempotencyKeyFor("run-test", 1));
  // Pinned: a run resumed by an agent of another version must see the same key (sha256 of "<run>\0<position>", 32 hex digits).
  assert.equal(idempotencyKeyFor("run-test", 1), "idk-47d4e02d850c9b283e4ad17fdb5307ee");
  assert.notEqual(idempotencyKeyFor("run-test", 1), idempotencyKeyFor("run-test", 2));
  assert.notEqual(idempotencyKeyFor("run-test", 1), idempotencyKeyFor("run-other", 1));
  await a.close();
});

void test("a different call at a recorded position is refused with a determinism error, then the job fails", async () => {
  const a = await agentSocket([done([0, "build", 0], "x"), done([1, "test", 0], "y")]);
  const [, r] = await a.call({ v: 2, op: "step", name: "build" }, { v: 2, op: "step", name: "lint" });
  const message = 'determinism error at call #1: the journal recorded step "test"#0 but the script called step "lint"#0';
  assert.deepEqual(r, { v: 2, ok: false, error: { code: "determinism", message }, exit: 1 });
  await a.event(`failed: ${message}`); // the job was failed
  const [later] = await a.call({ v: 2, op: "step", name: "anything" });
  assert.deepEqual(later, { v: 2, ok: false, error: { code: "determinism", message }, exit: 1 });
  await a.close();
});

void test("a wrong protocol version, an unknown op and a malformed line are refused with exit 1", async () => {
  const a = await agentSocket([]);
  const [v1, unknown, bad] = await a.call({ v: 1, op: "hello" }, { v: 2, op: "teleport" }, { v: 2, op: "step", name: "" });
  assert.equal(v1?.["ok"], false);
  assert.match(JSON.stringify(v1), /speaks socket protocol 2/);
  assert.match(JSON.stringify(unknown), /does not know the op \\"teleport\\"/);
  assert.deepEqual([bad?.["ok"], bad?.["exit"], (bad?.["error"] as { code: string }).code], [false, 1, "invalid_argument"]);
  await a.close();
});

void test("output.set stages values without the server", async () => {
  const a = await agentSocket([]);
  const [r] = await a.call({ v: 2, op: "output.set", values: { version: "1.2.3" } });
  assert.deepEqual(r, { v: 2, ok: true });
  await a.close();
});

void test("output.set refuses values that would not fit in the finish body", async () => {
  const a = await agentSocket([]);
  const [big] = await a.call({ v: 2, op: "output.set", values: { blob: "x".repeat(300 * 1024) } });
  assert.deepEqual([big?.["ok"], (big?.["error"] as { code: string }).code, big?.["exit"]], [false, "payload_too_large", 1]);
  await a.close();
});

void test("annotate refuses an empty note and one over the server's limit as usage errors that say so, exit 2, without the server", async () => {
  const backend = fakeBackend({ annotate: () => Promise.resolve() });
  const a = await agentSocket([], backend);
  const [empty, big, fine] = await a.call(
    { v: 2, op: "annotate", markdown: "" },
    { v: 2, op: "annotate", markdown: "x".repeat(64 * 1024 + 1) },
    { v: 2, op: "annotate", markdown: "Deployed **1.4.2**" },
  );
  const refusal = (r: typeof empty): unknown[] => [r?.["ok"], r?.["exit"], (r?.["error"] as { message: string } | undefined)?.message];
  // Before: exit 1 and zod's words ("bad annotate request: markdown: Too small: expected string to have >=1 characters").
  assert.deepEqual(refusal(empty), [false, 2, "flow annotate: the note is empty: give the markdown, or - to read it from stdin"]);
  assert.deepEqual(refusal(big), [false, 2, "flow annotate: the note is 65537 characters, 1 over the limit of 65536"]);
  assert.deepEqual(fine, { v: 2, ok: true });
  assert.deepEqual(backend.calls, [["annotate", "Deployed **1.4.2**"]]);
  await a.close();
});
