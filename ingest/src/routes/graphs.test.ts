/**
 * Stored graphs (routes/graphs.ts) and their endpoints (routes/graph-endpoints.ts) over
 * app.inject(): set, list, show, remove, the requirements report, roles, refusals with paths, and a
 * trigger/webhook node's endpoint living and dying with its graph.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  ask,
  assertCallerRefusals,
  assertError,
  connectTestAccount,
  countRows,
  createTestApp,
  type Answer,
  type TestApp,
} from "../testing/test-app.js";

let t: TestApp;
let graphs: string;
before(async () => {
  t = await createTestApp({ publicUrl: "https://flow.example" });
  graphs = `${t.project.base}/graphs`;
});
after(() => t.close());

const GRAPH = {
  version: "flowsvc-graph/v1",
  nodes: [
    { id: "fetch", type: "http", config: { url: "https://api.example/x", credential: "gh" } },
    { id: "build", type: "code", config: { source: "echo", credentials: { TOKEN: "reg" } } },
    { id: "dyn", type: "http", config: { url: "https://x", credential: { $expr: "input.cred" } } },
  ],
  edges: [{ from: "fetch", to: "build" }],
};

const put = (name: string, body: unknown, as: "admin" | "member" = "admin"): Promise<Answer> =>
  ask(t, "PUT", `${graphs}/${name}`, { as, body });

test("an admin stores a draft before its credentials exist; ls, show and rm; set again replaces", async () => {
  const created = await put("deploy", { document: GRAPH });
  assert.equal(created.status, 201, created.text);
  assert.deepEqual(created.body, {
    name: "deploy",
    nodes: 3,
    created_by: "ada",
    updated_at: (created.body as { updated_at: string }).updated_at,
    endpoints: [],
  });
  const list = await ask(t, "GET", graphs, { as: "viewer" });
  assert.deepEqual(
    (list.body as Array<Record<string, unknown>>).map((g) => [g["name"], g["nodes"], g["created_by"]]),
    [["deploy", 3, "ada"]],
  );
  const show = await ask(t, "GET", `${graphs}/deploy`, { as: "viewer" });
  assert.equal(show.status, 200, show.text);
  assert.deepEqual((show.body as { document: unknown }).document, GRAPH, "show answers the document as it was sent");
  const replaced = await put("deploy", { document: { ...GRAPH, nodes: GRAPH.nodes.slice(0, 1), edges: [] } });
  assert.equal(replaced.status, 200, replaced.text);
  assert.equal((replaced.body as { nodes: number }).nodes, 1);
  assert.equal((await ask(t, "DELETE", `${graphs}/deploy`, { as: "admin" })).status, 204);
  assertError(await ask(t, "GET", `${graphs}/deploy`, { as: "viewer" }), 404, /graph deploy is not stored in/);
  assertError(await ask(t, "DELETE", `${graphs}/deploy`, { as: "admin" }), 404, /graph deploy is not stored in/);
});

test("the requirements report: missing, ok, wrong_kind, and an account by its status (ok, needs_reconnect); dynamic names apart", async () => {
  assert.equal((await put("req", { document: GRAPH })).status, 201);
  const report = async () => (await ask(t, "GET", `${graphs}/req/requirements`, { as: "viewer" })).body as Record<string, unknown>;
  const states = (r: Record<string, unknown>) =>
    (r["credentials"] as Array<Record<string, unknown>>).map((c) => [c["node_id"], c["name"], c["state"], c["stored_kind"]]);
  const first = await report();
  assert.equal(first["ready"], false);
  assert.deepEqual(states(first), [
    ["fetch", "gh", "missing", undefined],
    ["build", "reg", "missing", undefined],
  ]);
  assert.deepEqual(first["dynamic"], [{ node_id: "dyn" }]);
  await ask(t, "PUT", `${t.project.base}/credentials/gh`, { as: "admin", body: { kind: "bearer", token: "t-1" } });
  // A connected account's state is its row's status (accounts, migration 013): usable ones are ok as bearer.
  await connectTestAccount(t, { name: "reg", status: "active" });
  assert.deepEqual(states(await report()), [
    ["fetch", "gh", "ok", "bearer"],
    ["build", "reg", "ok", "bearer"],
  ]);
  const regState = async (status: string): Promise<unknown> => {
    await t.db.pool.query(`update accounts set status = $2 where project_id = $1 and name = 'reg'`, [t.project.projectId, status]);
    const r = await report();
    const row = (r["credentials"] as Array<Record<string, unknown>>).find((c) => c["name"] === "reg")!;
    return [status, row["state"], row["stored_kind"], r["ready"]];
  };
  assert.deepEqual(await regState("refreshing"), ["refreshing", "ok", "bearer", true]);
  for (const status of ["needs_reauth", "in_doubt", "disabled"])
    assert.deepEqual(await regState(status), [status, "needs_reconnect", "bearer", false]);
  // A granter who is no member any more (here: the user deleted) takes the grant's use with them: reported as disabled.
  await regState("active");
  await t.db.pool.query(`update accounts set granter_id = null where project_id = $1 and name = 'reg'`, [t.project.projectId]);
  const left = (await report())["credentials"] as Array<Record<string, unknown>>;
  assert.match(String(left.find((c) => c["name"] === "reg")!["problem"]), /connected account "reg" is disabled: reconnect it/);
  // wrong_kind: a from_repo credential must be bearer or url-token.
  const repo = {
    version: "flowsvc-graph/v1",
    nodes: [{ id: "w", type: "workflow", config: { from_repo: { repo: "o/r", path: "x.sh", credential: "basic1" } } }],
    edges: [],
  };
  await ask(t, "PUT", `${t.project.base}/credentials/basic1`, { as: "admin", body: { kind: "basic", username: "u", password: "p" } });
  assert.equal((await put("repo", { document: repo })).status, 201);
  const r3 = (await ask(t, "GET", `${graphs}/repo/requirements`, { as: "viewer" })).body as Record<string, unknown>;
  assert.deepEqual(states(r3), [["w", "basic1", "wrong_kind", "basic"]]);
  assert.equal((r3["credentials"] as Array<Record<string, unknown>>)[0]!["required_kind"], "bearer|url_token");
  assertError(await ask(t, "GET", `${graphs}/nope/requirements`, { as: "viewer" }), 404, /graph nope is not stored/);
});

test("graph routes refuse callers: no token, a forged token, a role below, a non-member", async () => {
  await assertCallerRefusals(t, { method: "GET", url: graphs }, "viewer");
  await assertCallerRefusals(t, { method: "GET", url: `${graphs}/req` }, "viewer");
  await assertCallerRefusals(t, { method: "GET", url: `${graphs}/req/requirements` }, "viewer");
  await assertCallerRefusals(t, { method: "PUT", url: `${graphs}/x`, body: { document: GRAPH } }, "admin");
  await assertCallerRefusals(t, { method: "DELETE", url: `${graphs}/req` }, "admin");
  assert.equal((await ask(t, "GET", `${graphs}/req`, { as: "viewer" })).status, 200, "the refused delete removed nothing");
});

test("bad bodies, documents and names are refused with where, and nothing is written", async () => {
  const before = await countRows(t, "graphs");
  const bad = (nodes: unknown[], edges: unknown[] = []) => ({ document: { version: "flowsvc-graph/v1", nodes, edges } });
  const cases: Array<[string, unknown, RegExp]> = [
    ["g", {}, /document: required/],
    ["g", { document: GRAPH, extra: 1 }, /document: required: the body is \{document/],
    ["g", bad([{ id: "a", type: "http", config: {} }]), /nodes\[0\]\.config\.url: required/],
    ["g", bad([{ id: "a", type: "emit", config: {} }], [{ from: "a", to: "b" }]), /edges\[0\]\.to: /],
    ["g", bad([{ id: "a", type: "nope", config: {} }]), /nodes\[0\]\.type: unknown node type "nope"/],
    ["g", bad([{ id: "a", type: "emit", config: {}, if: "input.(" }]), /nodes\[0\]\.if: /],
    [
      "g",
      bad([{ id: "say", type: "slack.post_message", config: { with: { channel: "#x", text: "hi" } } }]),
      /nodes\[0\]\.config\.credential: required: slack.post_message needs a credential of kind bearer/,
    ],
    // A connector's whole config is checked at save, as `flow check` checks it (not only its credential).
    [
      "g",
      bad([{ id: "ask", type: "anthropic.messages", config: { credential: "k", with: { max_tokens: 8 }, input: "hi", bogus: 1 } }]),
      /nodes\[0\]\.config\.bogus: not an anthropic.messages setting .*; nodes\[0\]\.config\.with\.model: required/,
    ],
    ["a.b", { document: GRAPH }, /graph name "a.b" is not allowed/],
    ["-g", { document: GRAPH }, /graph name "-g" is not allowed/],
    ["a%2Fb", { document: GRAPH }, /graph name "a\/b" is not allowed/],
    ["x".repeat(41), { document: GRAPH }, /graph name "x{41}" is not allowed/],
    [
      "g",
      bad([{ id: "a".repeat(60), type: "trigger", config: {} }]),
      /nodes\[0\]\.id: the endpoint's event type graph\.g\.a+\.delivery is longer than 64/,
    ],
  ];
  for (const [name, body, want] of cases)
    assertError(await put(name, body), 400, want, `put ${name} ${JSON.stringify(body).slice(0, 100)}`);
  // JSON Postgres cannot store, or a number past double range, refused with its place; hostile path segments too.
  const doc = (config: string) =>
    `{"document":{"version":"flowsvc-graph/v1","nodes":[{"id":"a","type":"emit","config":${config}}],"edges":[]}}`;
  for (const [raw, want] of [
    [doc('{"n":1e400}'), /body\.document\.nodes\[0\]\.config\.n is a number outside the range/],
    [doc('{"s":"a\\u0000b"}'), /body\.document\.nodes\[0\]\.config\.s .*NUL/],
    [doc('{"s":"\\ud800"}'), /body\.document\.nodes\[0\]\.config\.s .*surrogate/],
    [doc(`${"[".repeat(200)}${"]".repeat(200)}`), /deeper|nest/],
  ] as Array<[string, RegExp]>)
    assertError(await put("g", raw), 400, want, raw.slice(0, 90));
  for (const segment of ["a%00b", "%ED%A0%80", "a%25"]) assert.equal((await put(segment, { document: GRAPH })).status, 400, segment);
  assert.equal(await countRows(t, "graphs"), before, "nothing was written");
});

test("a trigger and a webhook node get endpoints: secret shown once, deliveries emit graph.<graph>.<node>.delivery, gone with the node and the graph", async () => {
  const doc = (...nodes: Array<[string, string, Record<string, unknown>?]>) => ({
    document: { version: "flowsvc-graph/v1", nodes: nodes.map(([id, type, config]) => ({ id, type, config: config ?? {} })), edges: [] },
  });
  const first = await put("hooked", doc(["start", "trigger"], ["cb", "webhook"]));
  assert.equal(first.status, 201, first.text);
  type Endpoint = { node_id: string; kind: string; secret?: string; ingest_url: string; emits: string };
  const eps = (first.body as { endpoints: Endpoint[] }).endpoints;
  assert.deepEqual(
    eps.map((e) => [e.node_id, e.kind, e.emits, e.ingest_url]),
    [
      ["start", "trigger", "graph.hooked.start.delivery", `https://flow.example/api/v1/graph-hooks/${t.project.org}/p/hooked/start`],
      ["cb", "webhook", "graph.hooked.cb.delivery", `https://flow.example/api/v1/graph-hooks/${t.project.org}/p/hooked/cb`],
    ],
  );
  const secret = eps[0]!.secret!;
  assert.match(secret, /^fhs_/);
  const show = await ask(t, "GET", `${graphs}/hooked`, { as: "viewer" });
  assert.ok(!show.text.includes(secret) && !show.text.includes(eps[1]!.secret!), "show never answers a secret");
  const url = `/api/v1/graph-hooks/${t.project.org}/p/hooked/start`;
  const deliver = (opts: { secret?: string; path?: string; body?: string | Buffer }) =>
    t.app.inject({
      method: "POST",
      url: `${opts.path ?? url}?x=1`,
      headers: { "content-type": "application/json", ...(opts.secret ? { "x-flow-hook-secret": opts.secret } : {}) },
      payload: opts.body ?? '{"n":1}',
    });
  assert.equal((await deliver({})).statusCode, 401);
  assert.equal((await deliver({ secret: eps[1]!.secret! })).statusCode, 401, "another endpoint's secret");
  const ok = await deliver({ secret });
  assert.equal(ok.statusCode, 202, ok.body);
  const { event_id, event_type } = ok.json<{ event_id: string; event_type: string }>();
  assert.equal(event_type, "graph.hooked.start.delivery");
  const { rows } = await t.db.pool.query<{ payload: unknown }>(`select payload from events where id = $1`, [event_id]);
  assert.deepEqual(rows[0]!.payload, { body: { n: 1 }, query: { x: "1" } });
  // A trigger's delivery starts a run of the stored graph, its input the event's envelope.
  const runId = ok.json<{ run_id: string }>().run_id;
  const run = await t.db.pool.query<{ workflow: string; filename: string; input: unknown; trusted: boolean }>(
    `select workflow, filename, input, trusted from runs where id = $1`,
    [runId],
  );
  assert.deepEqual(run.rows[0], {
    workflow: "flowsvc-graph/v1",
    filename: "graph:hooked",
    input: { type: "graph.hooked.start.delivery", event: event_id, payload: { body: { n: 1 }, query: { x: "1" } } },
    trusted: true,
  });
  assert.equal(await countRows(t, `graph_nodes where run_id = '${runId}'`), 2);
  // The event catalog lists what stored graphs declare: their endpoints' types and emit nodes' literal types.
  assert.equal(
    (await put("emitter", doc(["say", "emit", { type: "item.checked" }], ["dyn", "emit", { type: { $expr: "input.t" } }]))).status,
    201,
  );
  const catalog = (await ask(t, "GET", `${t.project.base}/events/catalog`, { as: "viewer" })).body as { declared: unknown[] };
  assert.deepEqual(catalog.declared, [
    { type: "graph.hooked.cb.delivery", graph: "hooked" },
    { type: "graph.hooked.start.delivery", graph: "hooked" },
    { type: "item.checked", graph: "emitter" },
  ]);
  assert.equal((await deliver({ secret, body: '{"n":1e400}' })).statusCode, 400);
  const events = await countRows(t, "events");
  const notUtf8 = await deliver({ secret, body: Buffer.from([0x7b, 0xff, 0x7d]) });
  assert.equal(notUtf8.statusCode, 400, "a body that is not UTF-8, as on an event hook");
  assert.match(notUtf8.json<{ error: { message: string } }>().error.message, /^body is not valid UTF-8 at byte offset 1 \(0xff\)/);
  assert.equal(await countRows(t, "events"), events, "nothing recorded");
  // Saved again without the trigger: its endpoint is gone, the webhook's keeps its secret (none
  // answered) and now emits its config's event_type under the graph's prefix.
  const again = await put("hooked", doc(["cb", "webhook", { event_type: "push" }]));
  assert.deepEqual(
    (again.body as { endpoints: Endpoint[] }).endpoints.map((e) => [e.node_id, e.secret, e.emits]),
    [["cb", undefined, "graph.hooked.cb.push"]],
  );
  assert.equal((await deliver({ secret })).statusCode, 404);
  const cbUrl = `/api/v1/graph-hooks/${t.project.org}/p/hooked/cb`;
  const pushed = await deliver({ secret: eps[1]!.secret!, path: cbUrl });
  assert.equal(pushed.statusCode, 202);
  assert.equal(pushed.json<{ event_type: string }>().event_type, "graph.hooked.cb.push");
  assert.equal((await ask(t, "DELETE", `${graphs}/hooked`, { as: "admin" })).status, 204);
  assert.equal((await deliver({ secret: eps[1]!.secret!, path: cbUrl })).statusCode, 404, "gone with the graph");
  assert.equal(await countRows(t, "graph_endpoints"), 0);
});
