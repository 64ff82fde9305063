/**
 * The approvals plugin (routes/approvals.ts) over app.inject(): a person answers the gate a graph
 * run is parked on; a job token, a hook secret or no token is refused every time and the run stays
 * parked; fields are checked with the exact refusal; hostile gate names and bodies are refused.
 *
 * The parked gate is written as the engine writes it (store's createRun, insertGraphNodes and
 * updateGraphNode: status parked, substate with the evaluated prompt and fields).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { approvalFieldsSchemaText, createValueMasker, type ApprovalField } from "@flowsvc/core";
import { GRAPH_WORKFLOW, createRun, insertGraphNodes, settleGraphNode, updateGraphNode, withTransaction } from "@flowsvc/store";
import {
  ask,
  assertCallerRefusals,
  assertError,
  countRows,
  createTestApp,
  deepJson,
  startScriptJob,
  type TestApp,
} from "../testing/test-app.js";

let t: TestApp;
let runs: string;
before(async () => {
  t = await createTestApp();
  runs = `${t.project.base}/runs`;
});
after(() => t.close());

const FIELDS: ApprovalField[] = [
  { name: "reason", type: "text", required: true },
  { name: "notes", type: "textarea" },
  { name: "env", type: "select", options: ["staging", "production"], default: "staging" },
];

const GRAPH = {
  version: GRAPH_WORKFLOW,
  nodes: [
    { id: "advice", type: "shell", config: { command: "echo ship it" } },
    { id: "gate", type: "approval", config: { prompt: { $template: "The model says: {{ nodes.advice.output.stdout }}" }, fields: FIELDS } },
    { id: "later", type: "approval", config: { prompt: "second gate" } },
  ],
  edges: [
    { from: "advice", to: "gate" },
    { from: "gate", to: "later" },
  ],
};

/** A graph run parked on `gate`, as the engine leaves it. */
const parkedRun = async (
  substate: { name: string; kind: string; [k: string]: unknown } = {
    name: "gate",
    kind: "approval",
    prompt: "The model says: ship it",
    fields: FIELDS,
  },
  source = JSON.stringify(GRAPH),
) =>
  withTransaction(t.db.pool, async (tx) => {
    const { id } = await createRun(tx, {
      projectId: t.project.projectId,
      source,
      filename: "deploy.json",
      trusted: true,
      workflow: GRAPH_WORKFLOW,
    });
    await insertGraphNodes(tx, id, { nodes: GRAPH.nodes, input: {} });
    await updateGraphNode(tx, id, "advice", {
      status: "success",
      attempt: 1,
      output: { stdout: "ship it" },
      started_at: "now",
      finished_at: "now",
    });
    await updateGraphNode(tx, id, "gate", { status: "parked", attempt: 1, mode: "wait", substate, started_at: "now" });
    return id;
  });

const signalsOf = async (runId: string) =>
  (
    await t.db.pool.query<{ name: string; payload: unknown; sent_by: string }>(
      `select name, payload, sent_by from signals where run_id = $1 order by id`,
      [runId],
    )
  ).rows;

test("a member approves with typed fields: the signal named after the gate carries the answer and the approver; a second answer is refused", async () => {
  const id = await parkedRun();
  const res = await ask(t, "POST", `${runs}/${id}/approvals/gate`, {
    body: { decision: "approve", fields: { reason: "tests pass", env: "production" } },
  });
  assert.equal(res.status, 200, res.text);
  const output = { reason: "tests pass", notes: "", env: "production" };
  assert.deepEqual(res.body, { run_id: id, gate: "gate", decision: "approve", approved_by: "mo", fields: output, delivered: false });
  assert.deepEqual(await signalsOf(id), [{ name: "gate", payload: { decision: "approve", ...output, approved_by: "mo" }, sent_by: "mo" }]);
  const again = await ask(t, "POST", `${runs}/${id}/approvals/gate`, { as: "admin", body: { decision: "reject" } });
  assertError(again, 409, new RegExp(`gate gate of run ${id} was already answered by mo`));
  assert.equal((await signalsOf(id)).length, 1);
});

test("a missing required field is refused with exactly the spec's message and the schema; nothing is delivered", async () => {
  const id = await parkedRun();
  const res = await ask(t, "POST", `${runs}/${id}/approvals/gate`, { body: { decision: "approve", fields: { notes: "n" } } });
  assertError(res, 400, /^approval field "reason" is required\n/);
  assert.equal(res.error?.message, `approval field "reason" is required\n${approvalFieldsSchemaText(FIELDS)}`);
  const select = await ask(t, "POST", `${runs}/${id}/approvals/gate`, {
    body: { decision: "approve", fields: { reason: "x", env: "prod" } },
  });
  assertError(select, 400, /^approval field "env" must be one of "staging", "production"; got "prod"/);
  assert.deepEqual(await signalsOf(id), []);
  // The run is still parked on the gate: a good answer now goes through.
  const ok = await ask(t, "POST", `${runs}/${id}/approvals/gate`, { body: { decision: "approve", fields: { reason: "x" } } });
  assert.equal(ok.status, 200, ok.text);
});

test("a reject needs no field and is delivered as decision reject", async () => {
  const id = await parkedRun();
  const res = await ask(t, "POST", `${runs}/${id}/approvals/gate`, { as: "admin", body: { decision: "reject" } });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual((await signalsOf(id))[0]?.payload, { decision: "reject", reason: "", notes: "", env: "staging", approved_by: "ada" });
});

test("without parked fields in the substate, the gate's fields come from the run's graph document", async () => {
  const id = await parkedRun({ name: "gate", kind: "approval" });
  const res = await ask(t, "POST", `${runs}/${id}/approvals/gate`, { body: { decision: "approve", fields: {} } });
  assertError(res, 400, /^approval field "reason" is required\n/);
  // Fail closed: a source that does not parse is not a gate without fields.
  const broken = await parkedRun({ name: "gate", kind: "approval" }, JSON.stringify({ ...GRAPH, version: "flowsvc-graph/v0" }));
  const refused = await ask(t, "POST", `${runs}/${broken}/approvals/gate`, { body: { decision: "approve", fields: {} } });
  assert.equal(refused.status, 500, refused.text);
  assert.deepEqual(await signalsOf(broken), []);
});

test("the run must be parked on that gate: 409 when not, 404 for no such gate, run or a gate that is no approval", async () => {
  const id = await parkedRun();
  const body = { decision: "approve", fields: { reason: "x" } };
  assertError(
    await ask(t, "POST", `${runs}/${id}/approvals/later`, { body }),
    409,
    new RegExp(`run ${id} is not parked on gate later \\(the gate is pending\\)`),
  );
  assertError(await ask(t, "POST", `${runs}/${id}/approvals/advice`, { body }), 404, new RegExp(`run ${id} has no approval gate "advice"`));
  assertError(await ask(t, "POST", `${runs}/${id}/approvals/nope`, { body }), 404, /has no approval gate "nope"/);
  assertError(await ask(t, "POST", `${runs}/run_missing/approvals/gate`, { body }), 404, /run run_missing not found/);
  const { runId: scriptId } = await startScriptJob(t, "true\n");
  assertError(await ask(t, "POST", `${runs}/${scriptId}/approvals/gate`, { body }), 409, /is not a graph or pipeline run/);
  assert.deepEqual(await signalsOf(id), []);
});

test("only a person's API token clears a gate: a job token, a hook secret, no token are refused every time; the run stays parked", async () => {
  const id = await parkedRun();
  const url = `${runs}/${id}/approvals/gate`;
  const body = { decision: "approve", fields: { reason: "I am a script" } };
  const job = await startScriptJob(t, "flow approve\n");
  // The job token as the agent presents it, after its claim.
  assert.equal((await ask(t, "POST", "/agent/v1/claim", { as: { token: job.token }, body: { agent_id: "a" } })).status, 200);
  const signals = await countRows(t, "signals");
  for (let i = 0; i < 3; i++) {
    assertError(
      await ask(t, "POST", url, { as: { token: job.token }, body }),
      401,
      /the API token is not valid for this server/,
      "a job token",
    );
    assertError(
      await ask(t, "POST", url, { as: "none", headers: { "x-flow-hook-secret": "whsec_abc" }, body }),
      401,
      /no API token was sent/,
      "a hook secret",
    );
    assertError(
      await ask(t, "POST", `${url}?secret=whsec_abc`, { as: "none", body }),
      401,
      /no API token was sent/,
      "a hook secret in the query",
    );
    assertError(
      await ask(t, "POST", url, { as: { token: "whsec_abc" }, body }),
      401,
      /the API token is not valid/,
      "a hook secret as a token",
    );
  }
  await assertCallerRefusals(t, { method: "POST", url, body }, "member");
  assert.equal(await countRows(t, "signals"), signals);
  const gate = await t.db.pool.query<{ status: string }>(`select status from graph_nodes where run_id = $1 and node_id = 'gate'`, [id]);
  assert.equal(gate.rows[0]?.status, "parked");
});

test("hostile gate names and bodies are refused with the place named, nothing delivered", async () => {
  const id = await parkedRun();
  const gateProblem = /^gate: a gate is an approval node's id/;
  for (const gate of ["%00", "ga%00te", "a%2Fb", "x".repeat(65), "..", "%F0%9F%92%A5", "1gate", "%ED%A0%80"]) {
    const res = await ask(t, "POST", `${runs}/${id}/approvals/${gate}`, { body: { decision: "approve" } });
    assert.ok(res.status === 400 || res.status === 404, `${gate}: ${res.status} ${res.text}`);
    if (res.status === 400)
      assert.ok(gateProblem.test(res.error?.message ?? "") || /path|percent|NUL|surrogate|UTF-8/.test(res.error?.message ?? ""), res.text);
  }
  assertError(await ask(t, "POST", `${runs}/${id}/approvals/${"x".repeat(65)}`, { body: { decision: "approve" } }), 400, gateProblem);
  const url = `${runs}/${id}/approvals/gate`;
  assertError(await ask(t, "POST", url, { body: {} }), 400, /^decision: must be "approve" or "reject"/);
  assertError(await ask(t, "POST", url, { body: { decision: "maybe" } }), 400, /^decision: must be "approve" or "reject"/);
  assertError(await ask(t, "POST", url, { body: { decision: "approve", extra: 1 } }), 400, /extra/);
  assertError(await ask(t, "POST", url, { body: { decision: "approve", fields: [1] } }), 400, /^fields/);
  assertError(await ask(t, "POST", url, { body: '{"decision":"approve","fields":{"reason":"a\\u0000b"}}' }), 400, /NUL/);
  assertError(await ask(t, "POST", url, { body: '{"decision":"approve","fields":{"reason":"\\ud800"}}' }), 400, /surrogate/);
  assertError(await ask(t, "POST", url, { body: '{"decision":"approve","fields":{"reason":1e400}}' }), 400, /outside the range/);
  assertError(await ask(t, "POST", url, { body: `{"decision":"approve","fields":{"reason":${deepJson(500)}}}` }), 400, /deep|nest/i);
  const long = await ask(t, "POST", url, { body: { decision: "approve", fields: { reason: "r".repeat(5000) } } });
  assertError(long, 400, /is 5000 characters long; at most 4096/);
  // A 1 MiB value never reaches the check: the body limit answers first.
  assertError(await ask(t, "POST", url, { body: { decision: "approve", fields: { reason: "r".repeat(1024 * 1024) } } }), 413, /limit/);
  const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`f${i}`, "x"]));
  assertError(await ask(t, "POST", url, { body: { decision: "approve", fields: many } }), 400, /^fields: at most 64 fields/);
  const proto = await ask(t, "POST", url, { body: '{"decision":"approve","fields":{"reason":"x","__proto__":{"approved_by":"mallory"}}}' });
  // Fastify's JSON parser refuses a __proto__ key before the route sees it; checkApprovalFields would too.
  assert.equal(proto.status, 400, proto.text);
  assert.deepEqual(await signalsOf(id), []);
});

test("GET approvals lists the gates a run is parked on, with prompt and fields (a viewer may read it)", async () => {
  const id = await parkedRun();
  const res = await ask(t, "GET", `${runs}/${id}/approvals`, { as: "viewer" });
  assert.equal(res.status, 200, res.text);
  const body = res.body as { run_id: string; gates: Array<Record<string, unknown>> };
  assert.equal(body.gates.length, 1);
  assert.deepEqual(
    { ...body.gates[0], parked_since: undefined },
    { gate: "gate", prompt: "The model says: ship it", fields: FIELDS, parked_since: undefined },
  );
  await assertCallerRefusals(t, { method: "GET", url: `${runs}/${id}/approvals` }, "viewer");
  assertError(await ask(t, "GET", `${runs}/run_missing/approvals`), 404, /not found/);
});

test("a graph run's nodes are masked by value: a short secret never renames a node record's fields", async () => {
  const id = await parkedRun();
  // A one-letter secret (allowed) is in every field name that holds a "t": node_id, type, status, attempt...
  assert.equal((await ask(t, "PUT", `${t.project.base}/secrets/one_letter`, { as: "admin", body: { value: "t" } })).status, 200);
  try {
    for (const url of [`${runs}/${id}`, `${runs}/${id}/steps`]) {
      const res = await ask(t, "GET", url, { as: "viewer" });
      assert.equal(res.status, 200, res.text);
      const body = res.body as { nodes?: unknown[] } | unknown[];
      const nodes = (Array.isArray(body) ? body : body.nodes) as Array<Record<string, unknown>>;
      assert.deepEqual(
        nodes.map((n) => [n["node_id"], n["type"], n["status"]]),
        [
          ["advice", "shell", "success"],
          ["gate", "approval", "parked"],
          ["later", "approval", "pending"],
        ],
        url,
      );
      // What the nodes hold is masked as ever: the output and the substate (its prompt may quote an output).
      assert.deepEqual(nodes[0]!["output"], { "s***dou***": "ship i***" }, url);
      assert.equal((nodes[1]!["substate"] as Record<string, unknown>)["prompt"], "The model says: ship i***", url);
    }
  } finally {
    assert.equal((await ask(t, "DELETE", `${t.project.base}/secrets/one_letter`, { as: "admin" })).status, 204);
  }
});

test("a node's result is shown from its masked column: still *** once the secret is deleted; its sealed exact output never shows", async () => {
  const id = await parkedRun();
  const value = "sk-shown-8812";
  assert.equal((await ask(t, "PUT", `${t.project.base}/secrets/shown`, { as: "admin", body: { value } })).status, 200);
  // The engine settles a node through its keeper (the graph driver's): masked, the exact output sealed.
  const keeper = { masker: createValueMasker([value]), keyring: t.keyring, scope: t.project };
  await withTransaction(t.db.pool, async (tx) => {
    await updateGraphNode(tx, id, "later", { status: "running", attempt: 1, started_at: "now" });
    await settleGraphNode(tx, {
      runId: id,
      nodeId: "later",
      attempt: 1,
      result: { ok: false, error: `HTTP 401: Bearer ${value}`, output: { body: { echoed: `Bearer ${value}` } } },
      storage: keeper,
    });
  });
  assert.equal((await ask(t, "DELETE", `${t.project.base}/secrets/shown`, { as: "admin" })).status, 204);
  for (const url of [`${runs}/${id}`, `${runs}/${id}/steps`]) {
    const res = await ask(t, "GET", url, { as: "viewer" });
    assert.equal(res.status, 200, res.text);
    assert.ok(!res.text.includes(value) && !res.text.includes("output_sealed"), `${url}: ${res.text}`);
    const body = res.body as { nodes?: unknown[] } | unknown[];
    const later = ((Array.isArray(body) ? body : body.nodes) as Array<Record<string, unknown>>)[2]!;
    assert.deepEqual([later["output"], later["error"]], [{ body: { echoed: "Bearer ***" } }, "HTTP 401: Bearer ***"], url);
  }
});
