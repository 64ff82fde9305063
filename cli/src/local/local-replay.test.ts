/**
 * The real `flow run` binary handed a recorded journal (`<state>/runs/<run-id>/journal.json`, as
 * local-run-dir.ts reads it, started with the run id): a journal the server refuses (a different
 * ordinal or kind at a position, core's JOURNAL_CASES) is refused by the local engine the same way,
 * exit 1 and core's determinism message; a journal the server accepts replays without running the
 * recorded call again; a journal.json that is not a journal is refused before the script starts.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { determinismError, newId } from "@flowsvc/core";
import type { JournalEntry } from "@flowsvc/core";
import { localStateDir } from "./config.js";
import { localRunDir } from "./local-run-dir.js";

/** This file is cli/dist/local/local-replay.test.js; the binary is cli/dist/bin/flow.js. */
const FLOW_BIN = fileURLToPath(new URL("../bin/flow.js", import.meta.url));

let home: string;
let work: string;
let env: Record<string, string | undefined>;

before(async () => {
  home = await mkdtemp(join(tmpdir(), "flowsvc-local-replay-"));
  work = await mkdtemp(join(tmpdir(), "flowsvc-local-replay-cwd-"));
  // No server anywhere: a port nobody listens on (1 is privileged and closed).
  env = { ...process.env, XDG_STATE_HOME: join(home, "state"), FLOWSVC_URL: "http://127.0.0.1:1", FLOWSVC_CONFIG: join(home, "none.json") };
  for (const name of ["FLOWSVC_TOKEN", "FLOWSVC_PROJECT", "FLOW_AGENT_SOCKET", "FLOW_IDEMPOTENCY_KEY"]) delete env[name];
});

after(async () => {
  await rm(home, { recursive: true, force: true });
  await rm(work, { recursive: true, force: true });
});

interface Result {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** `flow run <file> --run-id <id>` after writing `journalText` into the run's directory. */
const replay = async (source: string, journalText: string): Promise<Result> => {
  const runId = newId("run", Date.now(), crypto.getRandomValues(new Uint8Array(10)));
  const run = localRunDir(localStateDir(env), runId);
  assert.ok(run);
  await mkdir(run.dir, { recursive: true, mode: 0o700 });
  await writeFile(run.journalFile, journalText);
  const file = join(work, `${runId}.sh`);
  await writeFile(file, source);
  const child = spawn(process.execPath, [FLOW_BIN, "run", file, "--run-id", runId], { cwd: work, env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.once("close", (c) => resolve(c)));
  return { code, stdout, stderr };
};

const done = (call: Omit<JournalEntry, "status" | "result">, result: unknown): JournalEntry => ({ ...call, status: "done", result });

void test("a recorded sleep with another ordinal at the position is refused with exit 1 and core's message", async () => {
  const recorded = done({ position: 0, kind: "sleep", name: "", ordinal: 1 }, {});
  const r = await replay("flow sleep 1h\necho after\n", JSON.stringify([recorded]));
  assert.equal(r.code, 1, r.stderr);
  assert.ok(r.stderr.includes(determinismError(recorded, { kind: "sleep", name: "", ordinal: 0 }).message), r.stderr);
  assert.equal(r.stdout.includes("after"), false, "the script ended at the refused call");
});

void test("a different kind at a recorded position is refused the same way", async () => {
  const recorded = done({ position: 0, kind: "sleep", name: "", ordinal: 0 }, {});
  const r = await replay("flow wait-signal go\necho after\n", JSON.stringify([recorded]));
  assert.equal(r.code, 1, r.stderr);
  const message = determinismError(recorded, { kind: "wait-signal", name: "go", ordinal: 0 }).message;
  assert.equal(message, 'determinism error at call #0: the journal recorded sleep ""#0 but the script called wait-signal "go"#0');
  assert.ok(r.stderr.includes(message), r.stderr);
});

void test("the recorded calls replay their results without waiting again", async () => {
  const journal = [
    done({ position: 0, kind: "sleep", name: "", ordinal: 0 }, {}),
    done({ position: 1, kind: "wait-signal", name: "approve", ordinal: 0 }, { payload: { by: "ana" } }),
  ];
  const r = await replay("flow sleep 1h\nflow wait-signal approve\necho after\n", JSON.stringify(journal));
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.stdout.includes("ana"), r.stdout);
  assert.ok(r.stdout.includes("after"), r.stdout);
});

void test("a journal.json that is not a journal is refused before the script runs", async () => {
  const bad = [
    "{",
    '[{"position":-1}]',
    JSON.stringify([{ ...done({ position: 0, kind: "sleep", name: "\u0000", ordinal: 0 }, {}), position: 1e308 }]),
    "[".repeat(5000),
  ];
  const results = await Promise.all(bad.map((text) => replay("echo ran\n", text)));
  results.forEach((r, i) => {
    assert.notEqual(r.code, 0, bad[i]!.slice(0, 40));
    assert.match(r.stderr, /journal\.json is not (valid JSON|a journal)/, r.stderr);
    assert.equal(r.stdout.includes("ran"), false);
  });
});
