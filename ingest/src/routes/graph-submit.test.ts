/** The graph submit of POST {scoped}/runs (routes/graph-submit.ts) over app.inject(): a document, a stored graph, and the refusals. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ask, assertCallerRefusals, assertError, connectTestAccount, countRows, createTestApp, type TestApp } from "../testing/test-app.js";

let t: TestApp;
let base: string;
before(async () => {
  t = await createTestApp();
  base = t.project.base;
});
after(() => t.close());

const doc = (nodes: unknown[], edges: unknown[] = []): string => JSON.stringify({ version: "flowsvc-graph/v1", nodes, edges });
const http = (id: string, config: Record<string, unknown> = {}): unknown => ({
  id,
  type: "http",
  config: { url: "https://example.test/", ...config },
});
const submit = (source: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  as: "graph",
  source,
  filename: "g.json",
  ...extra,
});

/** A refused graph submit writes no run, no job, no node. */
const refused = async (body: unknown, status: number, message: RegExp): Promise<void> => {
  const counts = async (): Promise<number[]> => [await countRows(t, "runs"), await countRows(t, "jobs"), await countRows(t, "graph_nodes")];
  const before = await counts();
  assertError(await ask(t, "POST", `${base}/runs`, { body }), status, message, JSON.stringify(body).slice(0, 100));
  assert.deepEqual(await counts(), before, "a refused submit wrote something");
};

test("a graph document becomes a queued graph run with pending nodes, its input, and no script job", async () => {
  const res = await ask(t, "POST", `${base}/runs`, {
    body: submit(doc([http("a"), http("b", { retry: undefined })], [{ from: "a", to: "b" }]), { input: { who: "ada" }, tags: ["g"] }),
  });
  assert.equal(res.status, 201, res.text);
  const run = res.body as { id: string; workflow: string; filename: string; tags: string[] };
  assert.deepEqual([run.workflow, run.filename, run.tags], ["flowsvc-graph/v1", "g.json", ["g"]]);
  const { rows } = await t.db.pool.query<{ node_id: string; status: string }>(
    `select node_id, status from graph_nodes where run_id = $1 order by ord`,
    [run.id],
  );
  assert.deepEqual(rows, [
    { node_id: "a", status: "pending" },
    { node_id: "b", status: "pending" },
  ]);
  const input = await t.db.pool.query<{ input: unknown }>(`select input from runs where id = $1`, [run.id]);
  assert.deepEqual(input.rows[0]?.input, { who: "ada" });
  assert.equal((await t.db.pool.query(`select 1 from jobs where run_id = $1`, [run.id])).rowCount, 0);
  const shown = await ask(t, "GET", `${base}/runs/${run.id}`, { as: "viewer" });
  assert.deepEqual(
    (shown.body as { nodes: Array<{ node_id: string }> }).nodes.map((n) => n.node_id),
    ["a", "b"],
  );
  const steps = await ask(t, "GET", `${base}/runs/${run.id}/steps`, { as: "viewer" });
  assert.deepEqual(
    (steps.body as Array<{ node_id: string; status: string; attempt: number }>).map((n) => [n.node_id, n.status, n.attempt]),
    [
      ["a", "pending", 0],
      ["b", "pending", 0],
    ],
  );
});

test("an idempotency key answers the first graph run with 200", async () => {
  const body = submit(doc([http("a")]), { idempotency_key: "graph-once" });
  const first = await ask(t, "POST", `${base}/runs`, { body });
  const again = await ask(t, "POST", `${base}/runs`, { body });
  assert.equal(first.status, 201, first.text);
  assert.deepEqual([again.status, again.body], [200, { id: (first.body as { id: string }).id, duplicate: true }]);
});

test("an invalid graph is refused with every problem's path, and nothing is written", async () => {
  await refused(submit(doc([{ id: "a", type: "http", config: {} }])), 400, /nodes\[0\]\.config\.url: required/);
  await refused(
    submit(doc([{ id: "a", type: "shell", config: { command: "env", env: { OK: "1", LD_AUDIT: "/tmp/x.so", BASH_ENV: "/tmp/x" } } }])),
    400,
    /nodes\[0\]\.config\.env\.LD_AUDIT: env variable "LD_AUDIT" is refused.*nodes\[0\]\.config\.env\.BASH_ENV: env variable "BASH_ENV" is refused/s,
  );
  await refused(submit(doc([http("a")], [{ from: "a", to: "zz" }])), 400, /edges\[0\]\.to/);
  await refused(
    submit(
      doc(
        [http("a"), http("b")],
        [
          { from: "a", to: "b" },
          { from: "b", to: "a" },
        ],
      ),
    ),
    400,
    /cycle/,
  );
  await refused(submit('{"version": "flowsvc-graph/v1", "nodes": [}'), 400, /not valid JSON/);
  await refused(submit(doc([http("a", { if: undefined })]), { input: { bad: "\u0000" } }), 400, /input/);
  await refused(submit(doc([{ id: "a", type: "http", if: "input.(", config: { url: "https://x.test/" } }])), 400, /nodes\[0\]\.if/);
  await refused({ as: "graph", source: doc([http("a")]) }, 400, /filename/);
  await refused({ as: "graph", source: doc([http("a")]), filename: "g.json", interpreter: ["sh"] }, 400, /interpreter/);
  await refused(submit(doc([http("a")]), { input: JSON.parse(`${"[".repeat(200)}${"]".repeat(200)}`) as unknown }), 400, /input/);
});

test("the submit-time check: a missing or wrong-kind credential names the node and the kinds; nothing is written", async () => {
  await refused(submit(doc([http("call", { credential: "gh" })])), 400, /node call: credential "gh" is missing/);
  const set = await ask(t, "PUT", `${base}/credentials/gh`, { body: { kind: "basic", username: "u", password: "p" }, as: "admin" });
  assert.equal(set.status, 200, set.text);
  await refused(
    submit(doc([{ id: "post", type: "slack.post_message", config: { credential: "gh", with: { channel: "#x", text: "hi" } } }])),
    400,
    /node post: credential "gh" is basic, node post needs bearer/,
  );
  const ok = await ask(t, "POST", `${base}/runs`, { body: submit(doc([http("call", { credential: "gh" })])) });
  assert.equal(ok.status, 201, ok.text);
  // A connector's config is checked whole before its credentials, as `flow check` checks it.
  await refused(
    submit(doc([{ id: "post", type: "slack.post_message", config: { credential: "gh", with: { channel: "#x" }, channel: "#x" } }])),
    400,
    /nodes\[0\]\.config\.channel: not a slack.post_message setting .*; nodes\[0\]\.config\.input: required/,
  );
});

test("the submit-time check reads holdings as the requirements report does: an account by its status", async () => {
  // A usable account (active, refreshing) is a bearer credential; any other status is refused with the reconnect message.
  await connectTestAccount(t, { name: "slackacct", status: "needs_reauth" });
  await refused(
    submit(doc([http("call", { credential: "slackacct" })])),
    400,
    /node call: connected account "slackacct" is needs_reauth: reconnect it/,
  );
  await t.db.pool.query(`update accounts set status = 'in_doubt' where name = 'slackacct'`);
  await refused(submit(doc([http("call", { credential: "slackacct" })])), 400, /"slackacct" is in_doubt: reconnect it/);
  for (const status of ["active", "refreshing"]) {
    await t.db.pool.query(`update accounts set status = $1 where name = 'slackacct'`, [status]);
    const post = { id: "post", type: "slack.post_message", config: { credential: "slackacct", with: { channel: "#x", text: "hi" } } };
    const ok = await ask(t, "POST", `${base}/runs`, { body: submit(doc([post])) });
    assert.equal(ok.status, 201, `${status}: ${ok.text}`);
  }
});

test("a stored graph runs by name; an unknown name is not found", async () => {
  const put = await ask(t, "PUT", `${base}/graphs/nightly`, { body: { document: JSON.parse(doc([http("a")])) as unknown }, as: "admin" });
  assert.ok(put.status === 200 || put.status === 201, put.text);
  const res = await ask(t, "POST", `${base}/runs`, { body: { graph: "nightly", input: { n: 1 } } });
  assert.equal(res.status, 201, res.text);
  assert.equal((res.body as { filename: string }).filename, "graph:nightly");
  await refused({ graph: "nope" }, 404, /graph nope not found/);
  await refused({ graph: "../etc" }, 400, /graph/);
});

test("a graph submit refuses callers: no token, a forged token, a viewer, a non-member", async () => {
  await assertCallerRefusals(t, { method: "POST", url: `${base}/runs`, body: submit(doc([http("a")])) }, "member");
});
