/**
 * Stored graphs on a real Postgres: put/get/list/delete, and the endpoints of trigger and webhook
 * nodes living and dying with their graph (a secret only from the save that created an endpoint).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createTestDatabase, createTestProject, type TestDatabase } from "./testing.js";
import { deleteStoredGraph, getStoredGraph, listGraphEndpoints, listStoredGraphs, putStoredGraph } from "./graphs.js";
import type { GraphDocument } from "@flowsvc/core";
import { hookSecretMatches } from "./hooks.js";
import { mintId } from "./mint.js";

let db: TestDatabase;
let projectId: string;
let userId: string;

before(async () => {
  db = await createTestDatabase();
  ({ projectId } = await createTestProject(db.pool));
  userId = mintId("usr");
  await db.pool.query(`insert into users (id, name) values ($1, 'ada')`, [userId]);
});
after(async () => db?.drop());

const doc = (...nodes: Array<[string, string]>): GraphDocument => ({
  version: "flowsvc-graph/v1",
  nodes: nodes.map(([id, type]) => ({ id, type, config: {} })),
  edges: [],
});

void test("a graph is created, replaced (creator kept), listed without its document, and removed", async () => {
  const first = await putStoredGraph(db.pool, { projectId, name: "g1", document: doc(["a", "emit"]), source: "{}", userId, endpoints: [] });
  assert.equal(first.created, true);
  assert.equal(first.graph.createdBy, "ada");
  const again = await putStoredGraph(db.pool, {
    projectId,
    name: "g1",
    document: doc(["a", "emit"], ["b", "emit"]),
    source: '{"v":2}',
    userId: mintId("usr"),
    endpoints: [],
  });
  assert.equal(again.created, false);
  const got = await getStoredGraph(db.pool, projectId, "g1");
  assert.equal(got?.source, '{"v":2}');
  assert.equal(got?.document.nodes.length, 2);
  assert.equal(got?.createdBy, "ada");
  const [meta] = await listStoredGraphs(db.pool, projectId);
  assert.deepEqual([meta?.name, meta?.nodes, meta?.endpoints, meta?.created_by], ["g1", 2, 0, "ada"]);
  assert.equal(await deleteStoredGraph(db.pool, projectId, "g1"), true);
  assert.equal(await deleteStoredGraph(db.pool, projectId, "g1"), false);
  assert.equal(await getStoredGraph(db.pool, projectId, "g1"), undefined);
});

void test("endpoints: minted once per node, kept across saves, removed with their node and with the graph", async () => {
  const put = (endpoints: Array<{ nodeId: string; kind: "trigger" | "webhook"; eventType: string }>) =>
    putStoredGraph(db.pool, { projectId, name: "hooked", document: doc(), source: "{}", userId, endpoints });
  const one = await put([
    { nodeId: "start", kind: "trigger", eventType: "graph.hooked.start.delivery" },
    { nodeId: "cb", kind: "webhook", eventType: "graph.hooked.cb.delivery" },
  ]);
  assert.ok(one.endpoints.every((e) => e.secret?.startsWith("fhs_")));
  const digest = async (node: string) =>
    (
      await db.pool.query<{ secret_digest: Buffer }>(
        `select secret_digest from graph_endpoints where graph_name = 'hooked' and node_id = $1`,
        [node],
      )
    ).rows[0]?.secret_digest;
  assert.ok(hookSecretMatches(one.endpoints[0]!.secret!, (await digest("start"))!));
  const two = await put([
    { nodeId: "start", kind: "webhook", eventType: "graph.hooked.start.delivery" },
    { nodeId: "new", kind: "trigger", eventType: "graph.hooked.new.push" },
  ]);
  assert.deepEqual(
    two.endpoints.map((e) => [e.node_id, e.kind, e.secret !== undefined]),
    [
      ["start", "webhook", false],
      ["new", "trigger", true],
    ],
  );
  assert.ok(hookSecretMatches(one.endpoints[0]!.secret!, (await digest("start"))!), "a kept endpoint keeps its secret");
  assert.equal(await digest("cb"), undefined, "the removed node's endpoint is gone");
  assert.deepEqual(
    (await listGraphEndpoints(db.pool, projectId, "hooked")).map((e) => e.node_id),
    ["new", "start"],
  );
  await deleteStoredGraph(db.pool, projectId, "hooked");
  assert.deepEqual(await listGraphEndpoints(db.pool, projectId, "hooked"), []);
});
