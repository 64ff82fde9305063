/**
 * Graph runs in the store (graph-runs.ts) on a real Postgres: a graph submit writes its nodes and no
 * script job; the one retry rule (`settleGraphNode`); a node job's finish (masked output, stdout
 * tail, a second finish refused), its give-up and its failed claim settle the node, not the run; a
 * graph run's wake nudges the driver instead of queueing a job; cancel ends nodes and their jobs;
 * a node's result at rest: masked, its exact output sealed for its run and node alone.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { FlowError, createValueMasker } from "@flowsvc/core";
import { addTestOrgKey, createTestDatabase, createTestProject, type TestDatabase } from "./testing.js";
import { withTransaction } from "./pool.js";
import { giveUpJob, submitGraphRun } from "./run-lifecycle.js";
import { cancelRun } from "./cancel.js";
import { failJobAtClaim } from "./credentials.js";
import { appendLogs } from "./logs.js";
import { wakeRun } from "./wake.js";
import { randomBytes } from "node:crypto";
import { Keyring } from "./keyring.js";
import {
  finishNodeJob,
  getGraphRunNodes,
  graphScope,
  lockGraphNodes,
  openGraphNodeOutputs,
  queueNodeJob,
  settleGraphNode,
  updateGraphNode,
  type NodeResultKeeper,
} from "./graph-runs.js";

let db: TestDatabase;
before(async () => {
  db = await createTestDatabase();
});
after(async () => db?.drop());

const SECRET = "graph-secret-4431";
const masker = createValueMasker([SECRET]);

const newGraphRun = async (
  nodes = [
    { id: "a", type: "code", retry: { attempts: 2, backoff_ms: 60_000 } },
    { id: "b", type: "http" },
  ],
) => {
  const { projectId } = await createTestProject(db.pool);
  const { id } = await withTransaction(db.pool, (tx) =>
    submitGraphRun(
      tx,
      { projectId, source: "{}", filename: "g.json", trusted: true, idempotencyKey: null },
      { sender: "ada", nodes, input: { who: "ada" } },
    ),
  );
  return id;
};

const node = async (runId: string, id: string) => (await getGraphRunNodes(db.pool, runId)).find((n) => n.node_id === id)!;

/** Starts attempt `attempt` of node `id` as an agent job, as the driver does; answers the job id. */
const startJob = (runId: string, id: string, attempt: number): Promise<string> =>
  withTransaction(db.pool, async (tx) => {
    await updateGraphNode(tx, runId, id, { status: "running", attempt, started_at: "now" });
    return queueNodeJob(tx, {
      runId,
      nodeId: id,
      capabilities: [],
      job: { source: "echo\n", filename: "a.sh", interpreter: ["bash"], env: {}, credentials: {} },
    });
  });

const liveJob = async (jobId: string): Promise<void> => {
  await db.pool.query(`update jobs set status = 'running' where id = $1`, [jobId]);
};

void test("a graph submit: the run, its pending nodes in document order, its input and scope, no job; a wake nudges instead of queueing", async () => {
  const runId = await newGraphRun();
  const nodes = await getGraphRunNodes(db.pool, runId);
  assert.deepEqual(
    nodes.map((n) => [n.node_id, n.type, n.status, n.attempt]),
    [
      ["a", "code", "pending", 0],
      ["b", "http", "pending", 0],
    ],
  );
  assert.deepEqual(await graphScope(db.pool, runId), {
    input: { who: "ada" },
    nodes: { a: { status: "pending", output: null }, b: { status: "pending", output: null } },
  });
  assert.equal((await db.pool.query(`select 1 from jobs where run_id = $1`, [runId])).rowCount, 0);
  await db.pool.query(`update runs set status = 'parked' where id = $1`, [runId]);
  assert.equal(await withTransaction(db.pool, (tx) => wakeRun(tx, runId)), "queued");
  assert.equal((await db.pool.query(`select 1 from jobs where run_id = $1`, [runId])).rowCount, 0, "a wake queued a script job");
});

void test("settleGraphNode: a failure with attempts left becomes pending after the backoff; the last one fails; a stale attempt writes nothing", async () => {
  const runId = await newGraphRun();
  const settle = (attempt: number, result: Parameters<typeof settleGraphNode>[1]["result"]) =>
    withTransaction(db.pool, (tx) => settleGraphNode(tx, { runId, nodeId: "a", attempt, result, storage: "as-written" }));
  await withTransaction(db.pool, (tx) => updateGraphNode(tx, runId, "a", { status: "running", attempt: 1 }));
  assert.equal(await settle(2, { ok: true, output: {} }), undefined, "a stale attempt was taken");
  assert.equal(await settle(1, { ok: false, error: "boom", output: { status: 500 } }), "retrying");
  const retrying = await db.pool.query<{ status: string; later: boolean; error: string }>(
    `select status, not_before > now() + interval '50 seconds' as later, error from graph_nodes where run_id = $1 and node_id = 'a'`,
    [runId],
  );
  assert.deepEqual(retrying.rows[0], { status: "pending", later: true, error: "boom" });
  await withTransaction(db.pool, (tx) => updateGraphNode(tx, runId, "a", { status: "running", attempt: 2 }));
  assert.equal(await settle(2, { ok: false, error: "boom again" }), "failed");
  assert.deepEqual([(await node(runId, "a")).status, (await node(runId, "a")).error], ["failed", "boom again"]);
  assert.equal(await settle(2, { ok: true, output: {} }), undefined, "a settled node settled again");
  // A final failure (a destination the egress policy refuses) is not retried, attempts left or not.
  await withTransaction(db.pool, (tx) =>
    updateGraphNode(tx, runId, "a", { status: "running", attempt: 1, error: null, finished_at: null }),
  );
  assert.equal(await settle(1, { ok: false, error: "refused", final: true }), "failed");
  assert.deepEqual([(await node(runId, "a")).status, (await node(runId, "a")).error], ["failed", "refused"]);
  await assert.rejects(
    withTransaction(db.pool, async (tx) => {
      await updateGraphNode(tx, runId, "b", { status: "running", attempt: 1 });
      await settleGraphNode(tx, { runId, nodeId: "b", attempt: 1, result: { ok: true, output: { bad: "\u0000" } }, storage: "as-written" });
    }),
    (e: unknown) => e instanceof FlowError && e.code === "invalid_argument",
  );
});

void test("a node job's finish: output masked with the stdout tail; a second finish is job_lost; a nonzero exit fails the attempt", async () => {
  const runId = await newGraphRun([{ id: "a", type: "code" }]);
  const jobId = await startJob(runId, "a", 1);
  await liveJob(jobId);
  await appendLogs(db.pool, runId, jobId, [
    { stream: "stdout", data: `token ${SECRET}\n` },
    { stream: "stderr", data: "noise\n" },
  ]);
  const finish = (exitCode: number) =>
    withTransaction(db.pool, (tx) => finishNodeJob(tx, { jobId, exitCode, outputs: { k: `v-${SECRET}` }, masker }));
  assert.equal(await finish(0), "success");
  const a = await node(runId, "a");
  assert.deepEqual(a.output, { k: "v-***", exit_code: 0, stdout: "token ***\n" });
  await assert.rejects(finish(0), (e: unknown) => e instanceof FlowError && e.code === "job_lost");

  const other = await newGraphRun([{ id: "a", type: "code" }]);
  const failing = await startJob(other, "a", 1);
  await liveJob(failing);
  assert.equal(await withTransaction(db.pool, (tx) => finishNodeJob(tx, { jobId: failing, exitCode: 3, outputs: {}, masker })), "failed");
  assert.deepEqual([(await node(other, "a")).status, (await node(other, "a")).error], ["failed", "the script exited with code 3"]);
  assert.equal((await db.pool.query<{ status: string }>(`select status from runs where id = $1`, [other])).rows[0]?.status, "queued");
});

void test("a node job given up or failed at claim fails its node, not the run; cancel ends the nodes and their jobs", async () => {
  const runId = await newGraphRun([
    { id: "a", type: "code" },
    { id: "b", type: "shell" },
    { id: "c", type: "http" },
  ]);
  const a = await startJob(runId, "a", 1);
  const b = await startJob(runId, "b", 1);
  await liveJob(a);
  await liveJob(b);
  await withTransaction(db.pool, (tx) =>
    giveUpJob(tx, { job: { id: a, run_id: runId, kind: "node", activity_id: null }, attempts: 5, publicUrl: undefined }),
  );
  await withTransaction(db.pool, (tx) =>
    failJobAtClaim(tx, {
      job: { id: b, run_id: runId, kind: "node", activity_id: null },
      error: "credentials do not resolve",
      publicUrl: undefined,
    }),
  );
  assert.deepEqual(
    (await getGraphRunNodes(db.pool, runId)).map((n) => [n.node_id, n.status]),
    [
      ["a", "failed"],
      ["b", "failed"],
      ["c", "pending"],
    ],
  );
  assert.match((await node(runId, "a")).error ?? "", /dispatched 5 times/);
  assert.equal((await db.pool.query<{ status: string }>(`select status from runs where id = $1`, [runId])).rows[0]?.status, "queued");
  const queued = await startJob(runId, "c", 1);
  await withTransaction(db.pool, (tx) => cancelRun(tx, runId, "stop", undefined));
  assert.equal((await node(runId, "c")).status, "cancelled");
  assert.equal((await db.pool.query<{ status: string }>(`select status from jobs where id = $1`, [queued])).rows[0]?.status, "done");
  assert.equal((await db.pool.query<{ status: string }>(`select status from runs where id = $1`, [runId])).rows[0]?.status, "cancelled");
});

void test("a node's result is stored masked, its exact output sealed for its run and node alone; nothing to hide seals nothing; an older row reads as it was", async () => {
  const keyring = await Keyring.create(db.pool, randomBytes(32));
  const scope = await createTestProject(db.pool);
  await addTestOrgKey(db.pool, keyring, scope.orgId);
  const keeper: NodeResultKeeper = { masker, keyring, scope };
  const nodes = ["echo", "fails", "plain", "old"].map((id) => ({ id, type: "http" }));
  const { id: runId } = await withTransaction(db.pool, (tx) =>
    submitGraphRun(
      tx,
      { projectId: scope.projectId, source: "{}", filename: "g.json", trusted: true, idempotencyKey: null },
      { sender: "ada", nodes, input: {} },
    ),
  );
  const echoed = { status: 200, body: { authorization: `Bearer ${SECRET}`, n: [1, SECRET, "\u2028"] } };
  const settle = (nodeId: string, result: Parameters<typeof settleGraphNode>[1]["result"]) =>
    withTransaction(db.pool, async (tx) => {
      await updateGraphNode(tx, runId, nodeId, { status: "running", attempt: 1 });
      return settleGraphNode(tx, { runId, nodeId, attempt: 1, result, storage: keeper });
    });
  assert.equal(await settle("echo", { ok: true, output: echoed }), "success");
  assert.equal(await settle("fails", { ok: false, error: `HTTP 401 for header "Bearer ${SECRET}"`, output: { body: SECRET } }), "failed");
  assert.equal(await settle("plain", { ok: true, output: { status: 204, body: "" } }), "success");
  // A row written before migration 030: its output in clear, nothing sealed.
  await withTransaction(db.pool, (tx) => updateGraphNode(tx, runId, "old", { status: "success", output: { kept: "as it was" } }));

  const raw = await db.pool.query<{ row: string }>(`select g::text as row from graph_nodes g where run_id = $1`, [runId]);
  assert.equal(raw.rows.length, 4);
  for (const { row } of raw.rows) assert.ok(!row.includes(SECRET), `the row holds the secret in clear: ${row}`);
  const shown = Object.fromEntries((await getGraphRunNodes(db.pool, runId)).map((n) => [n.node_id, [n.output, n.error]]));
  assert.deepEqual(shown, {
    echo: [{ status: 200, body: { authorization: "Bearer ***", n: [1, "***", "\u2028"] } }, null],
    fails: [{ body: "***" }, 'HTTP 401 for header "Bearer ***"'],
    plain: [{ status: 204, body: "" }, null],
    old: [{ kept: "as it was" }, null],
  });

  const rows = await withTransaction(db.pool, (tx) => lockGraphNodes(tx, runId));
  assert.deepEqual(
    rows.map((r) => [r.node_id, r.output_sealed === null]),
    [
      ["echo", false],
      ["fails", false],
      ["plain", true],
      ["old", true],
    ],
    "only an output that masking changed is sealed",
  );
  const opened = Object.fromEntries((await openGraphNodeOutputs(keyring, scope, runId, rows)).map((r) => [r.node_id, r.output]));
  assert.deepEqual(opened, { echo: echoed, fails: { body: SECRET }, plain: { status: 204, body: "" }, old: { kept: "as it was" } });
  // A sealed output moved to another node, or read for another run, does not open.
  const echo = rows.find((r) => r.node_id === "echo")!;
  await assert.rejects(openGraphNodeOutputs(keyring, scope, runId, [{ ...echo, node_id: "plain" }]), /could not be opened/);
  await assert.rejects(openGraphNodeOutputs(keyring, scope, "run_other", [echo]), /could not be opened/);
  // A retry that succeeds with nothing to hide leaves no sealed value of the failed attempt behind.
  await withTransaction(db.pool, async (tx) => {
    await updateGraphNode(tx, runId, "fails", { status: "running", attempt: 2 });
    await settleGraphNode(tx, { runId, nodeId: "fails", attempt: 2, result: { ok: true, output: "fine" }, storage: keeper });
  });
  const again = await db.pool.query(`select output, output_sealed, error from graph_nodes where run_id = $1 and node_id = 'fails'`, [
    runId,
  ]);
  assert.deepEqual(again.rows[0], { output: "fine", output_sealed: null, error: null });
});
