/** The pipeline submit of POST {scoped}/runs (routes/pipeline-submit.ts) over app.inject(): compiled to one graph run, and the refusals. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { parseGraph } from "@flowsvc/core";
import { ask, assertError, countRows, createTestApp, type TestApp } from "../testing/test-app.js";

let t: TestApp;
let base: string;
before(async () => {
  t = await createTestApp();
  base = t.project.base;
});
after(() => t.close());

const submit = (source: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  as: "pipeline",
  source,
  filename: "ci.yaml",
  ...extra,
});

/** A refused pipeline submit writes no run, no job, no node. */
const refused = async (body: unknown, status: number, message: RegExp): Promise<void> => {
  const counts = async (): Promise<number[]> => [await countRows(t, "runs"), await countRows(t, "jobs"), await countRows(t, "graph_nodes")];
  const before = await counts();
  assertError(await ask(t, "POST", `${base}/runs`, { body }), status, message, JSON.stringify(body).slice(0, 100));
  assert.deepEqual(await counts(), before, "a refused submit wrote something");
};

const CI = `jobs:
  build:
    steps: [{run: make}, {uses: emit, with: {type: built}}, {run: "echo \${{ input.ref }}"}]
  test: {needs: build, if: "input.ref != 'skip'", steps: [{run: make test}]}
`;

test("a pipeline becomes one pipeline run on the graph engine: its YAML its source, the compiled graph beside it, its jobs' nodes pending, in order, with its input", async () => {
  const res = await ask(t, "POST", `${base}/runs`, { body: submit(CI, { input: { ref: "main" }, tags: ["ci"] }) });
  assert.equal(res.status, 201, res.text);
  const run = res.body as { id: string; filename: string; tags: string[]; workflow: string };
  assert.deepEqual([run.workflow, run.filename, run.tags], ["flowsvc/pipeline/v1", "ci.yaml", ["ci"]]);
  const stored = await t.db.pool.query<{ source: string; graph: string; workflow: string }>(
    `select source, graph, workflow from runs where id = $1`,
    [run.id],
  );
  assert.equal(stored.rows[0]?.source, CI);
  assert.match(stored.rows[0]?.graph ?? "", /^\{"version":"flowsvc-graph\/v1",/);
  const shown = await ask(t, "GET", `${base}/runs/${run.id}`);
  assert.equal((shown.body as { nodes?: unknown[] }).nodes?.length, 4, "GET runs/<id> shows a pipeline run's nodes");
  const { rows } = await t.db.pool.query<{ node_id: string; status: string }>(
    `select node_id, status from graph_nodes where run_id = $1 order by ord`,
    [run.id],
  );
  assert.deepEqual(
    rows.map((r) => `${r.node_id}:${r.status}`),
    ["build--step1:pending", "build--step2:pending", "build:pending", "test:pending"],
  );
  const input = await t.db.pool.query<{ input: unknown }>(`select input from runs where id = $1`, [run.id]);
  assert.deepEqual(input.rows[0]?.input, { ref: "main" });
});

test("refused with the YAML line and column, and nothing written: bad pipelines, --credential, groups that do not evaluate", async () => {
  await refused(
    submit("jobs:\n  a:\n    needs: [zz]\n    steps: [{run: x}]\n"),
    400,
    /line 3, column 13: jobs\.a\.needs\[0\]: no job is named "zz"/,
  );
  await refused(
    submit("credentials: {T: '${{ input.x }}'}\njobs: {a: {steps: [{run: x}]}}\n"),
    400,
    /line 1, column 18: credentials\.T: .*credential NAME/,
  );
  await refused(submit('jobs: {a: {steps: [{run: "x\\0"}]}}\n'), 400, /holds a NUL/);
  // env: follows core's one rule for a run's environment (FLOW_*, LD_PRELOAD, PATH...), at the variable's line.
  await refused(
    submit("env: {OK: 1, LD_PRELOAD: /tmp/x.so}\njobs: {a: {env: {FLOW_TOKEN: x, PATH: /x}, steps: [{run: x}]}}\n"),
    400,
    /env\.LD_PRELOAD: env variable "LD_PRELOAD" is refused: the dynamic loader.*jobs\.a\.env\.FLOW_TOKEN: env variable "FLOW_TOKEN" is refused.*jobs\.a\.env\.PATH: env variable "PATH" is refused/s,
  );
  await refused(
    submit("jobs: {a: {steps: [{run: x}]}}\n", { credentials: { T: "tok" } }),
    400,
    /--credential is refused on a pipeline submit/,
  );
  await refused(
    submit("concurrency: {group: '${{ steps.a.output }}'}\njobs: {a: {steps: [{run: x}]}}\n"),
    400,
    /line 1, column \d+: concurrency\.group/,
  );
  await refused(
    submit("concurrency: {group: 'g-${{ input.g }}'}\njobs: {a: {steps: [{run: x}]}}\n", { input: { g: "z".repeat(300) } }),
    400,
    /^concurrency\.group: the group evaluates to 302 characters/,
  );
  await refused(submit("concurrency: {group: 'd-${{ input.nope }}'}\njobs: {a: {steps: [{run: x}]}}\n"), 400, /^concurrency\.group: /);
  await refused(
    submit("concurrency: {group: '${{ input.g }}'}\njobs: {a: {steps: [{run: x}]}}\n", { input: { g: "" } }),
    400,
    /^concurrency\.group: the group evaluates to 0 characters/,
  );
  // Hostile group text and input: a NUL or a lone surrogate in the YAML's group text, or in the input it reads.
  const grouped = (group: string): string => `concurrency: {group: ${group}}\njobs: {a: {steps: [{run: x}]}}\n`;
  await refused(submit(grouped('"d-\\0"')), 400, /line 1, column \d+: concurrency\.group: .*NUL/);
  await refused(submit(grouped('"d-\\ud800"')), 400, /line 1, column \d+: concurrency\.group: .*surrogate/);
  await refused(submit(grouped("'d-${{ input.g }}'"), { input: { g: "\ud800" } }), 400, /surrogate/);
  await refused(submit(grouped("'d-${{ input.g }}'"), { input: { g: "a\u0000b" } }), 400, /NUL/);
  await refused(submit(grouped("'${{ env.NOPE }}'")), 400, /^concurrency\.group: .*NOPE/);
  await refused(submit("jobs: {a: {steps: [{run: x}]}}\n", { interpreter: ["bash"] }), 400, /interpreter/);
});

test("a pipeline naming a missing credential is refused like a graph (the job's node named)", async () => {
  await refused(
    submit("jobs: {a: {credentials: {T: nope-cred}, steps: [{run: x}]}}\n"),
    400,
    /node a: credential nope-cred is missing|nope-cred/,
  );
});

test("a workflow concurrency group shares flow lock's leases: queue holds the later run ungranted; cancel-running cancels the older ones; cancel_on is recorded", async () => {
  const pipeline = (policy: string): string =>
    `concurrency: {group: 'deploy-\${{ input.ref }}', policy: ${policy}}\ncancel_on: [pr.closed]\njobs: {a: {wait_for_event: {type: never}}}\n`;
  const post = async (policy: string, ref: string): Promise<string> => {
    const res = await ask(t, "POST", `${base}/runs`, { body: submit(pipeline(policy), { input: { ref } }) });
    assert.equal(res.status, 201, res.text);
    return (res.body as { id: string }).id;
  };
  const leases = async (grp: string) =>
    (
      await t.db.pool.query<{ run_id: string; granted: boolean; released: boolean; status: string }>(
        `select l.run_id, l.granted_at is not null as granted, l.released_at is not null as released, r.status
           from lock_leases l join runs r on r.id = l.run_id where l.grp = $1 order by l.id`,
        [grp],
      )
    ).rows;
  const q1 = await post("queue", "q");
  const q2 = await post("queue", "q");
  // The queued run says what it waits for.
  const shown = await ask(t, "GET", `${base}/runs/${q2}`);
  assert.deepEqual((shown.body as { status: string; substate: unknown }).substate, { name: "deploy-q", kind: "concurrency" });
  assert.equal((shown.body as { status: string }).status, "queued");
  assert.deepEqual(
    (await leases("deploy-q")).map((l) => [l.run_id, l.granted]),
    [
      [q1, true],
      [q2, false],
    ],
  );
  const c = [await post("cancel-running", "c"), await post("cancel-running", "c"), await post("cancel-running", "c")];
  const rows = await leases("deploy-c");
  assert.deepEqual(
    rows.map((l) => [l.run_id, l.status, l.granted, l.released]),
    [
      [c[0], "cancelled", true, true],
      [c[1], "cancelled", true, true],
      [c[2], "queued", true, false],
    ],
  );
  const { rows: events } = await t.db.pool.query<{ n: number }>(
    `select count(*)::int as n from events where type = 'run.cancelled' and payload->>'run_id' = any($1::text[])`,
    [c.slice(0, 2)],
  );
  assert.equal(events[0]?.n, 2, "each cancelled run published run.cancelled once");
  const { rows: cancelOn } = await t.db.pool.query<{ cancel_on: string[] }>(`select cancel_on from runs where id = $1`, [q1]);
  assert.deepEqual(cancelOn[0]?.cancel_on, ["pr.closed"]);
});

test("a job with retry: is taken and stored as a graph the engine parses again (its backoff in ms), each of its nodes with the retry", async () => {
  const yaml = `jobs:\n  flaky:\n    retry: {attempts: 3, backoff: 2s}\n    steps: [{run: a}, {uses: emit, with: {type: t}}]\n`;
  const res = await ask(t, "POST", `${base}/runs`, { body: submit(yaml) });
  assert.equal(res.status, 201, res.text);
  const id = (res.body as { id: string }).id;
  const stored = await t.db.pool.query<{ graph: string }>(`select graph from runs where id = $1`, [id]);
  const parsed = parseGraph(JSON.parse(stored.rows[0]!.graph));
  assert.ok(parsed.ok, JSON.stringify(parsed));
  assert.deepEqual(
    parsed.graph.nodes.map((n) => [n.id, n.retry]),
    [
      ["flaky--step1", { attempts: 3, backoff_ms: 2000 }],
      ["flaky", { attempts: 3, backoff_ms: 2000 }],
    ],
  );
  const { rows } = await t.db.pool.query<{ retry: unknown }>(`select retry from graph_nodes where run_id = $1 order by ord`, [id]);
  assert.deepEqual(
    rows.map((r) => r.retry),
    [
      { attempts: 3, backoff_ms: 2000 },
      { attempts: 3, backoff_ms: 2000 },
    ],
  );
});
