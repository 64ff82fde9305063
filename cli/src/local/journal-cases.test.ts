/**
 * core's replay table (JOURNAL_CASES) against both engines: the server's store on a real Postgres
 * (performCall for calls, recordJournal + determinismError as the `/agent/v1/journal` route does
 * for records) and the local engine's LocalBackend. Each case must get the table's answer from
 * both, so `flow run` accepts exactly the replays the server accepts.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { FlowError, JOURNAL_CASES, determinismError, newId } from "@flowsvc/core";
import type { CallResponse, JournalCase, JournalCaseAnswer, JournalEntry } from "@flowsvc/core";
import { createTestDatabase, createTestProject, mintId, performCall, recordJournal, withTransaction } from "@flowsvc/store";
import type { TestDatabase } from "@flowsvc/store";
import { LocalBackend } from "./local-backend.js";
import { localRunDir } from "./local-run-dir.js";

let db: TestDatabase;
let projectId: string;
let home: string;

before(async () => {
  db = await createTestDatabase();
  ({ projectId } = await createTestProject(db.pool));
  home = await mkdtemp(join(tmpdir(), "flowsvc-journal-cases-"));
});
after(async () => {
  await db?.drop();
  await rm(home, { recursive: true, force: true });
});

/** What a request got, in the table's terms. `fresh`: the position was empty before. */
const answerOf = (entry: JournalEntry, fresh: boolean): JournalCaseAnswer => ({ type: fresh ? "recorded" : "replayed", entry });

const refusalOf = (err: unknown): JournalCaseAnswer => {
  if (!(err instanceof FlowError) || err.code !== "determinism") throw err;
  return { type: "refused", code: "determinism", message: err.message };
};

const doneEntry = (res: CallResponse): JournalEntry => {
  assert.equal(res.status, "done", `answered ${JSON.stringify(res)}`);
  return res.entry;
};

/** The server: a running run whose journal holds the case's entries. */
const serverAnswer = async (c: JournalCase): Promise<JournalCaseAnswer> => {
  const runId = mintId("run");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted) values ($1, $2, 'flowsvc/script/v1', 'running', '', 's.sh', '{bash}', '{}', true)`,
    [runId, projectId],
  );
  for (const e of c.journal) {
    await db.pool.query(
      `insert into journal (run_id, position, kind, name, ordinal, status, result, resolved_at) values ($1, $2, $3, $4, $5, $6, $7, now())`,
      [runId, e.position, e.kind, e.name, e.ordinal, e.status, JSON.stringify(e.result)],
    );
  }
  const { via, args, result, ...at } = c.request;
  const fresh = !c.journal.some((e) => e.position === at.position);
  try {
    if (via === "call")
      return answerOf(doneEntry(await withTransaction(db.pool, (tx) => performCall(tx, runId, { ...at, args: args ?? {} }))), fresh);
    const out = await recordJournal(db.pool, runId, { ...at, status: "done", result });
    if (out.type === "mismatch") throw determinismError(out.entry, at);
    return answerOf(out.entry, out.type === "recorded");
  } catch (err) {
    return refusalOf(err);
  }
};

/** The local engine: a LocalBackend handed the case's journal, as `flow run` is by journal.json. */
const localAnswer = async (c: JournalCase): Promise<JournalCaseAnswer> => {
  const stateDir = join(home, "state");
  const run = localRunDir(stateDir, newId("run", Date.now(), crypto.getRandomValues(new Uint8Array(10))));
  assert.ok(run);
  const backend = new LocalBackend({
    run,
    stateDir,
    source: "",
    filename: "s.sh",
    interpreter: ["bash"],
    env: {},
    cwd: home,
    activityEnv: {},
    spawnEnv: {},
    output: { stdout: () => undefined, stderr: () => undefined },
    journal: c.journal,
  });
  const { via, args, result, ...at } = c.request;
  const fresh = !c.journal.some((e) => e.position === at.position);
  try {
    if (via === "call") return answerOf(doneEntry(await backend.call({ ...at, args: args ?? {} })), fresh);
    const entry = await backend.record({ ...at, status: "done", result });
    return answerOf(entry, fresh);
  } catch (err) {
    return refusalOf(err);
  } finally {
    await backend.close();
  }
};

void test("the table covers a replay, a new call, a kept first write and each kind of refusal", () => {
  const types = new Set(JOURNAL_CASES.map((c) => `${c.request.via}:${c.expect.type}`));
  for (const t of ["call:replayed", "call:recorded", "call:refused", "record:replayed", "record:recorded", "record:refused"])
    assert.ok(types.has(t), t);
});

for (const c of JOURNAL_CASES) {
  void test(`server and local engine: ${c.name}`, async () => {
    const server = await serverAnswer(c);
    const local = await localAnswer(c);
    assert.deepEqual(server, c.expect, "server");
    assert.deepEqual(local, c.expect, "local engine");
  });
}

void test("the local engine hands the recorded journal to the agent in its claim", async () => {
  const journal = JOURNAL_CASES[1]!.journal;
  const stateDir = join(home, "state");
  const run = localRunDir(stateDir, newId("run", Date.now(), crypto.getRandomValues(new Uint8Array(10))));
  assert.ok(run);
  const backend = new LocalBackend({
    run,
    stateDir,
    source: "x",
    filename: "s.sh",
    interpreter: ["bash"],
    env: {},
    cwd: home,
    activityEnv: {},
    spawnEnv: {},
    output: { stdout: () => undefined, stderr: () => undefined },
    journal,
  });
  const claim = await backend.claim({ agent_id: "local", capabilities: [] });
  assert.ok(claim.kind === "script");
  assert.deepEqual(claim.journal, journal);
  await backend.close();
});
