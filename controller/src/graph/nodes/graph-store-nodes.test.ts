/**
 * The workflow, event, trigger and webhook executors on a real Postgres: what each answers the
 * engine (a child run made, a park with its event wait and deadline, the run's input), and the
 * refusals that fail a node without side effects. The engine's parking and waking are the driver's
 * (tested with it); from_repo against a forge peer is in test/src/peers/from-repo.test.ts.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { CallRequest } from "@flowsvc/core";
import {
  createTestDatabase,
  createTestProject,
  mintId,
  performCall,
  putStoredGraph,
  withTransaction,
  type TestDatabase,
} from "@flowsvc/store";
import type { NodeContext, NodeOutcome } from "./types.js";
import { workflowExecutor } from "./workflow.js";
import { eventExecutor } from "./event.js";
import { triggerExecutor } from "./trigger.js";
import { webhookExecutor } from "./webhook.js";

let db: TestDatabase;
let projectId: string;
let parentId: string;

before(async () => {
  db = await createTestDatabase();
  ({ projectId } = await createTestProject(db.pool));
  parentId = mintId("run");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted)
     values ($1, $2, 'flowsvc-graph/v1', 'running', '{}', 'graph:parent', '{}', '{}', true)`,
    [parentId, projectId],
  );
  const userId = mintId("usr");
  await db.pool.query(`insert into users (id, name) values ($1, 'ada')`, [userId]);
  const child = {
    version: "flowsvc-graph/v1" as const,
    nodes: [
      { id: "a", type: "emit", config: { type: "x.y" } },
      { id: "b", type: "emit", config: { type: "x.z" }, retry: { attempts: 2, backoff_ms: 10 } },
    ],
    edges: [{ from: "a", to: "b" }],
  };
  await putStoredGraph(db.pool, { projectId, name: "child", document: child, source: JSON.stringify(child), userId, endpoints: [] });
});
after(async () => db?.drop());

const ctxOf = (
  type: string,
  config: unknown,
  { attempt, node, ...run }: Partial<NodeContext["run"]> & { attempt?: number; node?: string } = {},
): NodeContext =>
  ({
    db: db.pool,
    run: {
      id: parentId,
      orgId: "org",
      projectId,
      rootRunId: parentId,
      parentRunId: null,
      trusted: true,
      input: { hello: "world" },
      graphName: "parent",
      ...run,
    },
    node: { id: node ?? "n1", type, config: {} },
    config,
    attempt: attempt ?? 1,
    signal: new AbortController().signal,
    credential: () => Promise.reject(new Error("no credential is used here")),
  }) as unknown as NodeContext;

const childRow = async (id: string) =>
  (
    await db.pool.query<{
      workflow: string;
      filename: string;
      parent_run_id: string;
      trusted: boolean;
      input: unknown;
      interpreter: string[];
    }>(`select workflow, filename, parent_run_id, trusted, input, interpreter from runs where id = $1`, [id])
  ).rows[0]!;

const childOf = (o: NodeOutcome): string => {
  assert.equal(o.kind, "child", JSON.stringify(o));
  return o.kind === "child" ? o.runId : "";
};

void test("workflow graph: a child run of the stored graph with its input and pending nodes; the same attempt again finds the same child", async () => {
  const first = childOf(await workflowExecutor.start(ctxOf("workflow", { graph: "child", input: { n: 1 } }, { node: "wf" })));
  const row = await childRow(first);
  assert.deepEqual(
    [row.workflow, row.filename, row.parent_run_id, row.trusted, row.input],
    ["flowsvc-graph/v1", "graph:child", parentId, true, { n: 1 }],
  );
  const { rows } = await db.pool.query<{ node_id: string; status: string; retry: unknown }>(
    `select node_id, status, retry from graph_nodes where run_id = $1 order by ord`,
    [first],
  );
  assert.deepEqual(
    rows.map((r) => [r.node_id, r.status, r.retry]),
    [
      ["a", "pending", null],
      ["b", "pending", { attempts: 2, backoff_ms: 10 }],
    ],
  );
  assert.equal(childOf(await workflowExecutor.start(ctxOf("workflow", { graph: "child" }, { node: "wf" }))), first, "a replayed attempt");
  const second = childOf(await workflowExecutor.start(ctxOf("workflow", { graph: "child" }, { node: "wf", attempt: 2 })));
  assert.notEqual(second, first, "a retry is a new attempt: a new child");
  const untrusted = childOf(await workflowExecutor.start(ctxOf("workflow", { graph: "child" }, { node: "wf2", trusted: false })));
  assert.equal((await childRow(untrusted)).trusted, false, "a child is as trusted as its parent");
});

void test("workflow script: a script child run with its interpreter; bad configs and unknown graphs fail the node, no run made", async () => {
  const id = childOf(await workflowExecutor.start(ctxOf("workflow", { script: "print(1)\n", interpreter: "python3 -u" }, { node: "py" })));
  const row = await childRow(id);
  assert.deepEqual([row.workflow, row.filename, row.interpreter], ["flowsvc/script/v1", "py", ["python3", "-u"]]);
  assert.deepEqual(
    (await childRow(childOf(await workflowExecutor.start(ctxOf("workflow", { script: "echo" }, { node: "sh" }))))).interpreter,
    ["bash", "-eu"],
  );
  // `filename` names the child's file; its extension picks the interpreter by core's table, unless `interpreter` is given.
  const named = await childRow(
    childOf(await workflowExecutor.start(ctxOf("workflow", { script: "print(1)\n", filename: "build.py" }, { node: "b" }))),
  );
  assert.deepEqual([named.filename, named.interpreter], ["build.py", ["python3"]]);
  const over = await childRow(
    childOf(await workflowExecutor.start(ctxOf("workflow", { script: "x", filename: "run.js", interpreter: "deno run" }, { node: "d" }))),
  );
  assert.deepEqual([over.filename, over.interpreter], ["run.js", ["deno", "run"]]);
  const before = Number((await db.pool.query<{ n: string }>(`select count(*) as n from runs`)).rows[0]!.n);
  const cases: Array<[unknown, RegExp]> = [
    [{ graph: "nope" }, /config\.graph: no stored graph "nope" in this project/],
    [{}, /give exactly one of graph/],
    [{ script: 7 }, /config\.script: must be a string/],
    [{ script: "a\u0000b" }, /cannot be run: .*NUL/],
    [{ from_repo: { repo: "not-a-repo", path: "x", credential: "c" } }, /config\.from_repo\.repo: must be owner\/name/],
    [{ from_repo: { repo: "../..", path: "x", credential: "c" } }, /config\.from_repo\.repo: must be owner\/name/],
    [{ from_repo: { repo: "o/..", path: "x", credential: "c" } }, /config\.from_repo\.repo: must be owner\/name/],
    [{ from_repo: { repo: "o/r", path: "../etc/passwd", credential: "c" } }, /config\.from_repo\.path: must be a path inside/],
    [{ from_repo: { repo: "o/r", path: "x" } }, /config\.from_repo\.credential: required/],
    [[], /config\.: must be an object/],
  ];
  for (const [config, want] of cases) {
    const o = await workflowExecutor.start(ctxOf("workflow", config));
    assert.equal(o.kind, "failed", JSON.stringify(config));
    assert.match(o.kind === "failed" ? o.error : "", want);
  }
  assert.equal(Number((await db.pool.query<{ n: string }>(`select count(*) as n from runs`)).rows[0]!.n), before);
});

void test("event: parks on the type with its when; the timeout counts from the node's first park, not from a later attempt", async () => {
  assert.deepEqual(await eventExecutor.start(ctxOf("event", { event: "deploy.done", when: "event.payload.ok" }, { node: "ev" })), {
    kind: "park",
    signal: "ev",
    eventWait: { type: "deploy.done", when: "event.payload.ok" },
  });
  const t0 = Date.now();
  const o = await eventExecutor.start(ctxOf("event", { event: "deploy.done", timeout: "1h" }, { node: "timed" }));
  assert.ok(o.kind === "park" && o.deadline);
  assert.ok(Math.abs(o.deadline.getTime() - (t0 + 3_600_000)) < 5_000);
  // The first park, as the engine records it: a wait-event journal entry naming the node, an hour ago.
  const req: CallRequest = {
    position: 0,
    kind: "wait-event",
    name: "deploy.done",
    ordinal: 0,
    args: { node: "timed", timeout_ms: 3_600_000 },
  };
  await withTransaction(db.pool, (tx) => performCall(tx, parentId, req));
  await db.pool.query(`update journal set created_at = now() - interval '50 minutes' where run_id = $1 and position = 0`, [parentId]);
  const again = await eventExecutor.start(ctxOf("event", { event: "deploy.done", timeout: "1h" }, { node: "timed", attempt: 2 }));
  assert.ok(again.kind === "park" && again.deadline);
  const left = again.deadline.getTime() - Date.now();
  assert.ok(left > 9 * 60_000 && left <= 10 * 60_000 + 5_000, `about 10 minutes are left, not an hour: ${left} ms`);
  for (const [config, want] of [
    [{ when: "true" }, /config\.event: required/],
    [{ event: "x", timeout: "soon" }, /config\.timeout: /],
  ] as Array<[unknown, RegExp]>) {
    const bad = await eventExecutor.start(ctxOf("event", config));
    assert.ok(bad.kind === "failed" && want.test(bad.error), JSON.stringify(bad));
  }
});

void test("trigger outputs the run's input; webhook parks on its endpoint's event, and fails in a graph that is not stored", async () => {
  assert.deepEqual(await triggerExecutor.start(ctxOf("trigger", {})), { kind: "succeeded", output: { hello: "world" } });
  assert.deepEqual(await triggerExecutor.start(ctxOf("trigger", {}, { input: null })), { kind: "succeeded", output: null });
  assert.deepEqual(await webhookExecutor.start(ctxOf("webhook", {}, { node: "cb" })), {
    kind: "park",
    signal: "cb",
    eventWait: { type: "graph.parent.cb.delivery" },
  });
  assert.deepEqual(await webhookExecutor.start(ctxOf("webhook", { event_type: "push" }, { node: "cb" })), {
    kind: "park",
    signal: "cb",
    eventWait: { type: "graph.parent.cb.push" },
  });
  const unstored = await webhookExecutor.start(ctxOf("webhook", {}, { node: "cb", graphName: null }));
  assert.ok(unstored.kind === "failed" && /has no endpoint: only a stored graph has endpoints/.test(unstored.error));
});
