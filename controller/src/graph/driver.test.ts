/**
 * Node results at rest, through the real graph driver on a real Postgres, against a local peer
 * (SECURITY.md: what a run writes that the API shows is masked before it is stored). An http node
 * whose far side echoes the credential's Authorization header, and one whose far side answers a
 * project secret, are stored masked (no byte of either value in the graph_nodes rows), while the
 * nodes downstream see the exact values (an `if` that holds only on the exact value; a request
 * body the peer receives); a node's error text that quotes the value is stored masked too.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { PoolClient } from "pg";
import { pino } from "pino";
import {
  Keyring,
  addTestOrgKey,
  createTestDatabase,
  createTestProject,
  getGraphRunNodes,
  sealNodeOutput,
  setCredential,
  startListener,
  submitGraphRun,
  upsertSecret,
  waitFor,
  withTransaction,
  type Listener,
  type TestDatabase,
} from "@flowsvc/store";
import { createEgressAgent } from "../net/egress-agent.js";
import { defaultEgressPolicy } from "../net/egress-policy.js";
import { GraphDriver } from "./driver.js";

const TOKEN = "tok-seal-7741";
const SECRET = "sec-seal-5528";

let db: TestDatabase;
let keyring: Keyring;
let listener: Listener;
let driver: GraphDriver;
let server: Server;
let base = "";
let scope: { orgId: string; projectId: string };
/** What the peer's /sink received: the bodies the nodes downstream sent. */
const sunk: unknown[] = [];
/** Local mode's policy: the peer on 127.0.0.1 may be reached. */
const egress = createEgressAgent(defaultEgressPolicy("local"));

before(async () => {
  db = await createTestDatabase();
  keyring = await Keyring.create(db.pool, randomBytes(32));
  scope = await createTestProject(db.pool);
  await addTestOrgKey(db.pool, keyring, scope.orgId);
  await setCredential(db.pool, keyring, { scope, name: "api", value: { kind: "bearer", token: TOKEN } });
  const sealed = await keyring.seal(scope.orgId, { org: scope.orgId, project: scope.projectId, kind: "secret", name: "S" }, SECRET);
  await upsertSecret(db.pool, scope.projectId, "S", sealed);
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const json = (body: unknown): void => void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
      if (req.url === "/echo") return json({ auth: req.headers.authorization ?? null });
      if (req.url === "/leak") return json({ value: SECRET });
      sunk.push(JSON.parse(Buffer.concat(chunks).toString()) as unknown);
      return json({ ok: true });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  listener = startListener(db.url, () => {});
  driver = new GraphDriver({
    pool: db.pool,
    keyring,
    listener,
    logger: pino({ level: "silent" }),
    publicUrl: undefined,
    egress,
    pollMs: 50,
  });
  driver.start();
});
after(async () => {
  driver?.stop();
  await driver?.drain();
  await listener?.close();
  await egress.close();
  server?.closeAllConnections();
  server?.close();
  await db?.drop();
});

/** A graph run, submitted as ingest does; `then` writes more in the submit's transaction (before the driver sees the run). */
const submit = (
  graph: { nodes: Array<{ id: string; type: string; [k: string]: unknown }>; edges: unknown[] },
  then?: (tx: PoolClient, runId: string) => Promise<unknown>,
): Promise<string> =>
  withTransaction(db.pool, async (tx) => {
    const { id } = await submitGraphRun(
      tx,
      {
        projectId: scope.projectId,
        source: JSON.stringify({ version: "flowsvc-graph/v1", ...graph }),
        filename: "g.json",
        trusted: true,
        idempotencyKey: null,
      },
      { sender: "ada", nodes: graph.nodes, input: {} },
    );
    await then?.(tx, id);
    return id;
  });

const ended = async (runId: string): Promise<{ status: string; error: string | null }> => {
  let run: { status: string; error: string | null } | undefined;
  await waitFor(`run ${runId} to end`, async () => {
    run = (await db.pool.query<{ status: string; error: string | null }>(`select status, error from runs where id = $1`, [runId])).rows[0];
    return run?.status === "succeeded" || run?.status === "failed";
  });
  return run!;
};

void test("http results that echo a credential or a secret are stored masked; downstream nodes see the exact values; an error quoting one is masked", async () => {
  const runId = await submit({
    nodes: [
      { id: "fetch", type: "http", config: { url: `${base}/echo`, credential: "api" } },
      { id: "leak", type: "http", config: { url: `${base}/leak` } },
      {
        id: "relay",
        type: "http",
        // Holds only on the exact value: "Bearer ***" would skip the node.
        if: `nodes.fetch.output.body.auth == "Bearer ${TOKEN}"`,
        config: {
          url: `${base}/sink`,
          method: "POST",
          body: { auth: { $expr: "nodes.fetch.output.body.auth" }, secret: { $expr: "nodes.leak.output.body.value" } },
        },
      },
      // An expression's error that quotes the value it read (a key looked up by the value).
      { id: "quote", type: "http", if: "nodes.fetch.output.body[nodes.fetch.output.body.auth] == 1", config: { url: `${base}/sink` } },
    ],
    edges: [
      { from: "fetch", to: "relay" },
      { from: "leak", to: "relay" },
      { from: "fetch", to: "quote" },
    ],
  });
  const run = await ended(runId);
  assert.equal(run.status, "failed", JSON.stringify(run));
  assert.deepEqual(sunk, [{ auth: `Bearer ${TOKEN}`, secret: SECRET }], "the node downstream received the exact values");

  const { rows } = await db.pool.query<{ row: string }>(`select g::text as row from graph_nodes g where run_id = $1`, [runId]);
  assert.equal(rows.length, 4);
  for (const { row } of rows) for (const value of [TOKEN, SECRET]) assert.ok(!row.includes(value), `a row holds ${value}: ${row}`);
  const nodes = Object.fromEntries((await getGraphRunNodes(db.pool, runId)).map((n) => [n.node_id, n]));
  assert.deepEqual((nodes.fetch?.output as { body: unknown }).body, { auth: "Bearer ***" });
  assert.deepEqual((nodes.leak?.output as { body: unknown }).body, { value: "***" });
  assert.equal(nodes.relay?.status, "success");
  assert.deepEqual([nodes.quote?.status, nodes.quote?.error], ["failed", "if: No such key: Bearer *** at line 1, column 1"]);
  assert.equal(run.error, "node quote failed: if: No such key: Bearer *** at line 1, column 1");
  const sealed = await db.pool.query<{ node_id: string }>(
    `select node_id from graph_nodes where run_id = $1 and output_sealed is not null order by node_id`,
    [runId],
  );
  assert.deepEqual(
    sealed.rows.map((r) => r.node_id),
    ["fetch", "leak"],
    "only the outputs that masking changed are sealed",
  );
});

void test("a row written before sealing (output in clear, nothing sealed) feeds the nodes downstream as it did; a moved sealed output fails closed", async () => {
  const graph = {
    nodes: [
      { id: "done", type: "http", config: { url: `${base}/echo` } },
      { id: "next", type: "http", config: { url: `${base}/sink`, method: "POST", body: { was: { $expr: "nodes.done.output.body" } } } },
    ],
    edges: [{ from: "done", to: "next" }],
  };
  // The first node as an older version settled it: its output in clear, nothing sealed.
  const runId = await submit(graph, (tx, id) =>
    tx.query(
      `update graph_nodes set status = 'success', attempt = 1, output = $2, finished_at = now() where run_id = $1 and node_id = 'done'`,
      [id, JSON.stringify({ body: { legacy: "clear" } })],
    ),
  );
  assert.equal((await ended(runId)).status, "succeeded");
  assert.deepEqual(sunk.at(-1), { was: { legacy: "clear" } });

  // A sealed output moved from another run does not open: the node reading it fails, named; the run ends.
  const moved = await sealNodeOutput(keyring, scope, { runId: "run_elsewhere", nodeId: "done" }, { body: "elsewhere" });
  const failing = await submit(graph, (tx, id) =>
    tx.query(
      `update graph_nodes set status = 'success', attempt = 1, output = '{"body": "***"}', output_sealed = $2, finished_at = now()
        where run_id = $1 and node_id = 'done'`,
      [id, moved],
    ),
  );
  const run = await ended(failing);
  assert.equal(run.status, "failed");
  assert.match(run.error ?? "", /^node next failed: a node's output could not be read: the node-output ".+\/done" .* could not be opened/);
  assert.notDeepEqual(sunk.at(-1), { was: "elsewhere" });
});

void test("an approval's prompt that quotes an echoed credential is stored masked, in the node's substate and in run.awaiting", async () => {
  const runId = await submit({
    nodes: [
      { id: "fetch", type: "http", config: { url: `${base}/echo`, credential: "api" } },
      { id: "gate", type: "approval", config: { prompt: { $template: "Deploy with {{ nodes.fetch.output.body.auth }}?" } } },
    ],
    edges: [{ from: "fetch", to: "gate" }],
  });
  await waitFor("the gate to park", async () => {
    const { rows } = await db.pool.query(`select 1 from graph_nodes where run_id = $1 and node_id = 'gate' and status = 'parked'`, [runId]);
    return rows.length === 1;
  });
  const { rows } = await db.pool.query<{ substate: { prompt: string }; payload: string }>(
    `select n.substate, (select e.payload::text from events e where e.type = 'run.awaiting' and e.source_run_id = n.run_id) as payload
       from graph_nodes n where n.run_id = $1 and n.node_id = 'gate'`,
    [runId],
  );
  assert.equal(rows[0]?.substate.prompt, "Deploy with Bearer ***?");
  assert.match(rows[0]?.payload ?? "", /Deploy with Bearer \*\*\*\?/);
  assert.ok(!(rows[0]?.payload ?? "").includes(TOKEN));
});
