/** `flow approve`'s prompts (promptFields) with scripted answers, and its refusals before any request. */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Stdio } from "../print.js";
import { FlowError } from "@flowsvc/core/errors";
import { runCli } from "./program.js";
import { promptFields, type LineReader } from "./approve.js";

const stdio = (): Stdio & { lines: string[] } => {
  const lines: string[] = [];
  return {
    lines,
    write: (d) => {
      lines.push(String(d));
      return Promise.resolve();
    },
    out: (t) => void lines.push(t),
    note: (t) => void lines.push(t),
    stdinIsTty: () => false,
    readStdin: () => Promise.resolve(""),
  };
};

/** Answers the scripted lines in order, then end of input; records the questions. */
const scripted = (answers: string[]): { read: LineReader; questions: string[] } => {
  const questions: string[] = [];
  return {
    questions,
    read: (q) => {
      questions.push(q);
      return Promise.resolve(answers.shift());
    },
  };
};

const GATE = {
  gate: "review",
  prompt: "The model says: ship it. Deploy?",
  fields: [
    { name: "reason", type: "text" as const, required: true },
    { name: "notes", type: "textarea" as const },
    { name: "env", type: "select" as const, options: ["staging", "production"], default: "staging" },
  ],
};

void test("text on one line, textarea until a blank line, select by number; the prompt and the default are shown", async () => {
  const io = stdio();
  const r = scripted(["tests pass", "line one", "line two", "", "2"]);
  assert.deepEqual(await promptFields(GATE, {}, r.read, io), { reason: "tests pass", notes: "line one\nline two", env: "production" });
  assert.equal(io.lines[0], GATE.prompt);
  assert.ok(io.lines.includes("  1) staging (default)") && io.lines.includes("  2) production"), io.lines.join("\n"));
  assert.deepEqual(r.questions, ["reason (required): ", "notes (end with a blank line or Ctrl-D):\n", "", "", "choose 1-2 [staging]: "]);
});

void test("--field values are not asked again; an empty answer leaves a field to its default", async () => {
  const io = stdio();
  const r = scripted(["", "production"]);
  assert.deepEqual(await promptFields(GATE, { reason: "given" }, r.read, io), { reason: "given", env: "production" });
  const enter = scripted(["", ""]);
  assert.deepEqual(await promptFields(GATE, { reason: "given" }, enter.read, io), { reason: "given" });
});

void test("end of input (Ctrl-D) at a text or select question stops: nothing is answered, not the defaults", async () => {
  const io = stdio();
  const stoppedAt = (field: string) => (err: unknown) =>
    err instanceof FlowError && err.code === "invalid_argument" && err.message.includes(`question for ${field}: nothing was sent`);
  await assert.rejects(promptFields(GATE, {}, scripted([]).read, io), stoppedAt("reason"));
  // An option that is not one, then Ctrl-D: before, this approved with the default (staging).
  const gate = { ...GATE, fields: [GATE.fields[2]!] };
  await assert.rejects(promptFields(gate, {}, scripted(["nope"]).read, io), stoppedAt("env"));
  // A textarea's Ctrl-D ends its text, as its question says; the select after it is then stopped.
  await assert.rejects(promptFields(GATE, { reason: "r" }, scripted(["line"]).read, io), stoppedAt("env"));
});

void test("a select answer that is no option is asked again", async () => {
  const io = stdio();
  const r = scripted(["x", "prod", "9", "staging"]);
  const gate = { ...GATE, fields: [GATE.fields[2]!] };
  assert.deepEqual(await promptFields(gate, {}, r.read, io), { env: "staging" });
  assert.equal(r.questions.length, 4);
  assert.ok(io.lines.includes('"prod" is not one of the options'));
});

void test("a malformed or repeated --field is refused before any request (exit 2)", async () => {
  for (const [args, want] of [
    [["--field", "reason"], /--field "reason": expected <name>=<value>/],
    [["--field", "a=1", "--field", "a=2"], /--field "a" is given twice/],
  ] as const) {
    const io = stdio();
    const code = await runCli(["node", "flow", "approve", "run-x", ...args], {
      env: { FLOWSVC_URL: "http://127.0.0.1:9" },
      io,
      now: () => new Date(0),
    });
    assert.equal(code, 2);
    assert.match(io.lines.join("\n"), want);
  }
});
