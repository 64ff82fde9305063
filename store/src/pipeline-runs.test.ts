/**
 * Pipeline runs in Postgres (migration 017, pipeline-runs.ts): each of a pipeline run's creators (a
 * `--as yaml` handler's delivery, `flow spawn --as pipeline`) makes a `flowsvc/pipeline/v1` run whose
 * source is the YAML and whose compiled graph, cancel_on and job groups sit beside it; workflow
 * groups read the env and the input; job-level groups share flow lock's lease table.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { PIPELINE_WORKFLOW } from "@flowsvc/core";
import { createTestDatabase, createTestProject, type TestDatabase } from "./testing.js";
import { withTransaction } from "./pool.js";
import { performCall } from "./calls.js";
import { emitEvent, type EmitInput } from "./emit.js";
import { jobGroupPosition, joinRunGroup, leaseAt, releaseLeaseAt, requestLease } from "./locks.js";
import { cancelRun } from "./cancel.js";
import { mintId } from "./mint.js";
import { appendLogs, readLogs } from "./logs.js";
import { listMigrations, migrate } from "./migrate.js";
import { lockGraphRun } from "./graph-runs.js";

let db: TestDatabase;
let projectId: string;

before(async () => {
  db = await createTestDatabase();
  ({ projectId } = await createTestProject(db.pool));
});
after(async () => db?.drop());

const PIPE = `env: {STAGE: prod, TARGET: "\${{ input.payload.region }}-\${{ env.STAGE }}"}
concurrency: {group: "deploy-\${{ env.TARGET }}", policy: queue}
cancel_on: [pr.closed]
jobs:
  build: {steps: [{run: make}]}
  deploy:
    needs: build
    concurrency: {group: "ship-\${{ env.STAGE }}", policy: cancel-running}
    steps: [{run: ./deploy}]
`;

const addPipelineHandler = (name: string, on: string[], source: string) =>
  db.pool.query(`insert into handlers (project_id, name, patterns, reaction) values ($1, $2, $3, $4)`, [
    projectId,
    name,
    on,
    JSON.stringify({ kind: "pipeline", source, filename: `${name}.yaml` }),
  ]);

const emit = (input: Partial<EmitInput> & Pick<EmitInput, "type">) =>
  withTransaction(db.pool, (tx) => emitEvent(tx, { projectId, key: null, payload: null, sourceRunId: null, trusted: true, ...input }));

interface Row {
  workflow: string;
  status: string;
  source: string;
  graph: string | null;
  cancel_on: string[] | null;
  job_groups: Array<{ job: string; nodes: string[]; group: string; policy: string }> | null;
  substate: unknown;
}
const runRow = async (id: string): Promise<Row> =>
  (await db.pool.query<Row>(`select workflow, status, source, graph, cancel_on, job_groups, substate from runs where id = $1`, [id]))
    .rows[0]!;

const leases = async (grp: string) =>
  (
    await db.pool.query<{ run_id: string; position: number; granted: boolean }>(
      `select run_id, position, granted_at is not null as granted from lock_leases where grp = $1 and released_at is null order by id`,
      [grp],
    )
  ).rows;

void test("a --as yaml handler starts a pipeline run: its YAML the source, the graph beside it, its group from the env and the event", async () => {
  await addPipelineHandler("pipe", ["deploy.asked"], PIPE);
  const first = await emit({ type: "deploy.asked", payload: { region: "eu" } });
  const second = await emit({ type: "deploy.asked", payload: { region: "eu" } });
  const [a, b] = [first.handlerRuns[0]!, second.handlerRuns[0]!];
  const row = await runRow(a);
  assert.deepEqual([row.workflow, row.source, row.cancel_on], [PIPELINE_WORKFLOW, PIPE, ["pr.closed"]]);
  assert.match(row.graph ?? "", /^\{"version":"flowsvc-graph\/v1"/);
  assert.deepEqual(
    row.job_groups?.map((g) => [g.job, g.nodes, g.group, g.policy]),
    [["deploy", ["deploy"], "ship-${{ env.STAGE }}", "cancel-running"]],
  );
  // The group read env.TARGET, itself evaluated over the event: the second run waits, and says so.
  assert.deepEqual(
    (await leases("deploy-eu-prod")).map((l) => [l.run_id, l.granted]),
    [
      [a, true],
      [b, false],
    ],
  );
  assert.deepEqual((await runRow(b)).substate, { name: "deploy-eu-prod", kind: "concurrency" });
  assert.equal((await runRow(a)).substate, null);
});

void test("a handler whose pipeline group does not evaluate for the event is declined, and no run starts", async () => {
  await addPipelineHandler(
    "needs-ref",
    ["ref.pushed"],
    "concurrency: {group: 'g-${{ input.payload.ref }}'}\njobs: {a: {steps: [{run: x}]}}\n",
  );
  const r = await emit({ type: "ref.pushed", payload: { other: 1 } });
  assert.deepEqual(r.handlerRuns, []);
  assert.equal(r.declined[0]?.handler, "needs-ref");
  assert.match(r.declined[0]?.error ?? "", /^concurrency\.group: .*ref/);
});

void test("flow spawn --as pipeline makes a pipeline run with its group (no input: the env alone)", async () => {
  const parent = mintId("run");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted) values ($1, $2, 'flowsvc/script/v1', 'running', '', 's.sh', '{bash}', '{}', true)`,
    [parent, projectId],
  );
  const spawn = (position: number) =>
    withTransaction(db.pool, (tx) =>
      performCall(tx, parent, {
        position,
        kind: "spawn",
        name: "",
        ordinal: 0,
        args: {
          source: "env: {E: sp}\nconcurrency: {group: 'spawned-${{ env.E }}'}\njobs: {a: {steps: [{run: x}]}}\n",
          filename: "c.yaml",
          as: "pipeline",
        },
      }),
    );
  const childOf = async (position: number): Promise<string> => ((await spawn(position)).entry.result as { run_id: string }).run_id;
  const one = { result: { run_id: await childOf(0) } };
  const two = { result: { run_id: await childOf(1) } };
  assert.equal((await runRow(one.result.run_id)).workflow, PIPELINE_WORKFLOW);
  assert.deepEqual(
    (await leases("spawned-sp")).map((l) => [l.run_id, l.granted]),
    [
      [one.result.run_id, true],
      [two.result.run_id, false],
    ],
  );
});

/** A bare live run of the project (a pipeline's, as far as leases go). */
const liveRun = async (): Promise<string> => {
  const id = mintId("run");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted) values ($1, $2, $3, 'running', '', 'p.yaml', '{}', '{}', true)`,
    [id, projectId, PIPELINE_WORKFLOW],
  );
  return id;
};

const joinGroup = (runId: string, grp: string, position: number, cancelRunning: boolean) =>
  withTransaction(db.pool, (tx) =>
    joinRunGroup(tx, {
      projectId,
      runId,
      grp,
      cancelRunning,
      position,
      cancel: (id) => cancelRun(tx, id, `superseded by ${runId}`, undefined),
    }),
  );

void test("job groups: FIFO with flow lock's leases, re-entrant in one run, released by position; cancel-running cancels other runs, never a flow lock", async () => {
  const [a, b, c, locker] = [await liveRun(), await liveRun(), await liveRun(), await liveRun()];
  assert.equal(await joinGroup(a, "jg", jobGroupPosition(0), false), true);
  assert.equal(await joinGroup(a, "jg", jobGroupPosition(1), false), true, "a second job of the same run is not held up by the first");
  assert.equal(await joinGroup(b, "jg", jobGroupPosition(0), false), false);
  assert.deepEqual(await withTransaction(db.pool, (tx) => leaseAt(tx, b, jobGroupPosition(0))), { state: "waiting", grp: "jg" });
  await withTransaction(db.pool, (tx) => releaseLeaseAt(tx, a, jobGroupPosition(0)));
  assert.equal(
    (await withTransaction(db.pool, (tx) => leaseAt(tx, b, jobGroupPosition(0)))).state,
    "waiting",
    "a still holds it by its other job",
  );
  await withTransaction(db.pool, (tx) => releaseLeaseAt(tx, a, jobGroupPosition(1)));
  assert.equal((await withTransaction(db.pool, (tx) => leaseAt(tx, b, jobGroupPosition(0)))).state, "held");
  // A script's flow lock queues behind b; c's cancel-running cancels b (a concurrency lease), not the script.
  await withTransaction(db.pool, (tx) => requestLease(tx, { projectId, grp: "jg", runId: locker, position: 0 }));
  assert.equal(await joinGroup(c, "jg", jobGroupPosition(0), true), false, "the script's lock is next in line");
  assert.deepEqual(
    [(await runRow(b)).status, (await runRow(locker)).status, (await runRow(a)).status],
    ["cancelled", "running", "running"],
  );
  assert.deepEqual(
    (await leases("jg")).map((l) => [l.run_id, l.granted]),
    [
      [locker, true],
      [c, false],
    ],
  );
  assert.deepEqual(await withTransaction(db.pool, (tx) => leaseAt(tx, mintId("run"), -2)), { state: "none", grp: null });
});

void test("a pipeline run's log lines carry their job after the node's attempt has ended; a graph run's carry none", async () => {
  const pipeline = await liveRun();
  const graph = mintId("run");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted) values ($1, $2, 'flowsvc-graph/v1', 'running', '{}', 'g.json', '{}', '{}', true)`,
    [graph, projectId],
  );
  for (const run of [pipeline, graph]) {
    const job = mintId("job");
    // The node job is done and its node settled (graph_nodes keeps no job_id then): only the job row knows its node.
    await db.pool.query(`insert into jobs (id, run_id, status, kind, node_id) values ($1, $2, 'done', 'node', 'build--step2')`, [job, run]);
    await appendLogs(db.pool, run, job, [{ stream: "stdout", data: "compiled\n" }]);
  }
  assert.deepEqual(
    (await readLogs(db.pool, pipeline, 0)).map((l) => [l.job, l.data]),
    [["build", "compiled\n"]],
  );
  assert.deepEqual(
    (await readLogs(db.pool, graph, 0)).map((l) => l.job),
    [null],
  );
});

void test("migration 017 turns older pipeline runs (graph runs of a .yaml/.yml file) into pipeline runs the engine still reads", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "flowsvc-migrations-016-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const m of await listMigrations()) if (m.version < 17) writeFileSync(join(dir, `${m.name}.sql`), m.sql);
  const old = await createTestDatabase({ empty: true });
  t.after(() => old.drop());
  await migrate(old.pool, () => {}, pathToFileURL(`${dir}/`));
  const { projectId: p } = await createTestProject(old.pool);
  const doc = '{"version":"flowsvc-graph/v1","nodes":[{"id":"a","type":"shell","config":{"command":"true"}}],"edges":[]}';
  const ids = { yaml: mintId("run"), yml: mintId("run"), json: mintId("run") };
  for (const [ext, id] of Object.entries(ids))
    await old.pool.query(
      `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted) values ($1, $2, 'flowsvc-graph/v1', 'parked', $3, $4, '{}', '{}', true)`,
      [id, p, doc, `ci.${ext}`],
    );
  await migrate(old.pool);
  const { rows } = await old.pool.query<{ id: string; workflow: string }>(`select id, workflow from runs order by filename`);
  assert.deepEqual(Object.fromEntries(rows.map((r) => [r.id, r.workflow])), {
    [ids.json]: "flowsvc-graph/v1",
    [ids.yaml]: PIPELINE_WORKFLOW,
    [ids.yml]: PIPELINE_WORKFLOW,
  });
  const locked = await withTransaction(old.pool, (tx) => lockGraphRun(tx, ids.yaml));
  assert.equal(locked?.graph, doc, "the engine's document of an older pipeline run is its source");
});
