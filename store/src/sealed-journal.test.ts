/**
 * Step and activity output sealed at rest, on a real Postgres and the real keyring: what is sealed
 * opens back to the recorded bytes in its run and in a rerun of it, and nowhere else.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { SEALED_JOURNAL_PREFIX } from "@flowsvc/core";
import { addTestOrgKey, createTestDatabase, type TestDatabase } from "./testing.js";
import { Keyring } from "./keyring.js";
import { mintId } from "./mint.js";
import { openJournal, openJournalResult, runLineage, sealActivityOutput, sealStepResult, type JournalSealScope } from "./sealed-journal.js";

const SECRET = "Tr0ub4dor-Välue-€-9321";

let db: TestDatabase;
let keyring: Keyring;
let scope: JournalSealScope;
let other: JournalSealScope;

const newRun = async (projectId: string, rerunOf: string | null = null): Promise<string> => {
  const id = mintId("run");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted, rerun_of)
     values ($1, $2, 'flowsvc/script/v1', 'running', '', 's.sh', '{bash}', '{}', true, $3)`,
    [id, projectId, rerunOf],
  );
  return id;
};

before(async () => {
  db = await createTestDatabase();
  keyring = await Keyring.create(db.pool, randomBytes(32));
  const orgId = mintId("org");
  await db.pool.query(`insert into orgs (id, name) values ($1, 'o')`, [orgId]);
  await addTestOrgKey(db.pool, keyring, orgId);
  scope = { orgId, projectId: mintId("prj") };
  other = { orgId, projectId: mintId("prj") };
  await db.pool.query(`insert into projects (id, org_id, name) values ($1, $2, 'p'), ($3, $2, 'q')`, [
    scope.projectId,
    orgId,
    other.projectId,
  ]);
});
after(async () => db?.drop());

/** What sealStepResult stored, which must be a sealed string here. */
const sealedText = (stored: unknown): string => {
  assert.equal(typeof stored, "string");
  return stored as string;
};

const stepResult = { stdout_b64: Buffer.from(`step: ${SECRET}\n\u0000\u00ff`).toString("base64"), exit: 0 };

void test("a sealed step result holds no plaintext and opens to the recorded value in its run and in reruns of it", async () => {
  const source = await newRun(scope.projectId);
  const rerun = await newRun(scope.projectId, source);
  const rerunOfRerun = await newRun(scope.projectId, rerun);
  const sealed = sealedText(await sealStepResult(keyring, scope, { runId: source, position: 3 }, stepResult));
  assert.ok(sealed.startsWith(SEALED_JOURNAL_PREFIX));
  assert.ok(!sealed.includes(SECRET) && !sealed.includes(stepResult.stdout_b64));
  for (const run of [source, rerun, rerunOfRerun]) {
    const [entry] = await openJournal(db.pool, keyring, scope, {
      runId: run,
      entries: [{ position: 3, kind: "step", name: "s", ordinal: 0, status: "done" as const, result: sealed }],
    });
    assert.deepEqual(entry!.result, stepResult, run);
  }
  assert.deepEqual([...(await runLineage(db.pool, rerunOfRerun))].sort(), [source, rerun, rerunOfRerun].sort());
});

void test("a sealed step result copied to another run, another position or another project does not open", async () => {
  const source = await newRun(scope.projectId);
  const stranger = await newRun(scope.projectId);
  const sealed = sealedText(await sealStepResult(keyring, scope, { runId: source, position: 0 }, stepResult));
  await assert.rejects(
    openJournalResult(keyring, scope, await runLineage(db.pool, stranger), { position: 0, result: sealed }),
    /sealed for run-.*#0, not for this run/,
  );
  await assert.rejects(
    openJournalResult(keyring, scope, await runLineage(db.pool, source), { position: 1, result: sealed }),
    /not for this run and position/,
  );
  await assert.rejects(openJournalResult(keyring, other, new Set([source]), { position: 0, result: sealed }), /could not be opened/);
  // The name in the sealed string is bound by the seal: rewriting it to this run fails to open.
  const relabelled = sealed.replace(source, stranger);
  await assert.rejects(openJournalResult(keyring, scope, new Set([stranger]), { position: 0, result: relabelled }), /could not be opened/);
});

void test("a step that printed nothing is stored plain and reads as it is; anything more than an exit code is sealed", async () => {
  const run = await newRun(scope.projectId);
  const place = { runId: run, position: 0 };
  for (const quiet of [
    { stdout_b64: "", exit: 0 },
    { stdout_b64: "", exit: 3 },
  ]) {
    const stored = await sealStepResult(keyring, scope, place, quiet);
    assert.deepEqual(stored, quiet);
    assert.deepEqual(await openJournalResult(keyring, scope, new Set([run]), { position: 0, result: stored }), quiet);
  }
  // One byte printed, an error text beside the empty stdout, an extra field, a non-integer exit: sealed.
  for (const loud of [
    { stdout_b64: "Cg==", exit: 0 },
    { stdout_b64: "", exit: 1, error: `step output is ${SECRET}` },
    { stdout_b64: "", exit: 0, note: SECRET },
    { stdout_b64: "", exit: Number.POSITIVE_INFINITY }, // 1e400 as JSON.parse reads it
    { stdout_b64: "", exit: "0" },
  ]) {
    const stored = sealedText(await sealStepResult(keyring, scope, place, loud));
    assert.ok(stored.startsWith(SEALED_JOURNAL_PREFIX) && !stored.includes(SECRET), JSON.stringify(loud));
    assert.deepEqual(
      await openJournalResult(keyring, scope, new Set([run]), { position: 0, result: stored }),
      JSON.parse(JSON.stringify(loud)),
    );
  }
});

void test("an activity's sealed stdout opens inside its result; plain results written before sealing read as they are", async () => {
  const run = await newRun(scope.projectId);
  const act = mintId("act");
  const stdout = Buffer.from(`act: ${SECRET}`).toString("base64");
  const sealed = await sealActivityOutput(keyring, scope, act, stdout);
  assert.ok(!sealed.includes(stdout));
  const entries = [
    { position: 0, kind: "activity", name: "a", ordinal: 0, status: "done" as const, result: { stdout_b64: sealed, exit: 4 } },
    { position: 1, kind: "step", name: "old", ordinal: 0, status: "done" as const, result: stepResult },
    {
      position: 2,
      kind: "wait-signal",
      name: "go",
      ordinal: 0,
      status: "done" as const,
      result: { payload: "flowsvc-sealed:1:not-base64!" },
    },
    { position: 3, kind: "sleep", name: "", ordinal: 0, status: "pending" as const, result: null },
  ];
  const opened = await openJournal(db.pool, keyring, scope, { runId: run, entries });
  assert.deepEqual(
    opened.map((e) => e.result),
    [{ stdout_b64: stdout, exit: 4 }, stepResult, { payload: "flowsvc-sealed:1:not-base64!" }, null],
  );
  const plain = await openJournal(db.pool, keyring, scope, { runId: run, entries: entries.slice(1) });
  assert.deepEqual(plain, entries.slice(1));
});
