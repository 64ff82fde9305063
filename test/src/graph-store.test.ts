/**
 * Stored graphs end to end (issue 10), with the real `flow` CLI and one real `flow server`:
 * `flow graph set|ls|show|rm`, the requirements report in each state the server can reach, and a
 * stored graph run from its own trigger endpoint through a workflow child (another stored graph),
 * an event node (a declined event, then a matching one) and a webhook node woken by a delivery to
 * its endpoint; removing the graph removes its endpoints.
 *
 * The server runs as a cluster's controller does by default, private addresses refused
 * (FLOWSVC_HTTP_ALLOW_PRIVATE=false): a peer on 127.0.0.1 stands for the cloud's instance
 * metadata service, and a graph's http nodes that name it (by `localhost`, by an IPv4-mapped
 * literal) fail with why while it gets no request (SSRF). Local mode's default, private allowed,
 * is what the other graph tests run under (their peers are on 127.0.0.1).
 *
 * `conflict` (a name held by both a credential and a connected account) cannot be reached here:
 * the project's one name space (connection_names, migration 008) lets a name have one holder.
 * `needs_reconnect` is an account row (migration 013) in `needs_reauth`, as renewal leaves one whose
 * grant is gone (each status is covered in ingest's graphs.test.ts; connecting in accounts.test.ts).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { startTestServer, type TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { ended, ok, runIdIn, runKit } from "./support/runs.js";
import { waitFor } from "./support/wait.js";

let server: TestServer;
let dir: string;
let db: pg.Pool;
let metadata: Server;
let metadataPort = 0;
/** The paths the metadata stand-in was asked for. */
const stolen: string[] = [];
const kit = runKit(
  () => server,
  () => dir,
);

const doc = (nodes: unknown[], edges: Array<[string, string]> = []): string =>
  JSON.stringify({ version: "flowsvc-graph/v1", nodes, edges: edges.map(([from, to]) => ({ from, to })) }, null, 2);

const DEPLOY = doc([
  { id: "fetch", type: "http", config: { url: "https://api.example/x", credential: "gh" } },
  { id: "build", type: "code", config: { source: "echo hi\n", credentials: { REG: "reg" } } },
  { id: "src", type: "workflow", config: { from_repo: { repo: "acme/ops", path: "run.sh", credential: "basic1" } } },
]);

before(async () => {
  metadata = createServer((req, res) => {
    stolen.push(req.url ?? "");
    res.writeHead(200, { "content-type": "application/json" }).end('{"AccessKeyId":"ASIA-stolen","SecretAccessKey":"stolen"}');
  });
  await new Promise<void>((r) => metadata.listen(0, "127.0.0.1", r));
  metadataPort = (metadata.address() as AddressInfo).port;
  server = await startTestServer({ agents: 1, env: { FLOWSVC_HTTP_ALLOW_PRIVATE: "false" } });
  dir = await scriptDir("flowsvc-graph-store-");
  db = new pg.Pool({ connectionString: server.databaseUrl, max: 2 });
});

after(async () => {
  await db?.end();
  await server?.stop();
  metadata?.closeAllConnections();
  metadata?.close();
  await rm(dir, { recursive: true, force: true });
});

test("flow graph set, ls, show, rm; requirements in the states ok, missing, wrong_kind and needs_reconnect", async () => {
  const file = await kit.script("deploy.json", DEPLOY);
  const set = ok(await server.cli(["graph", "set", "deploy", file]));
  assert.match(set.stderr, /graph deploy stored \(3 nodes\)/);
  const ls = ok(await server.cli(["graph", "ls"]));
  assert.match(ls.stdout, /^NAME\s+NODES\s+ENDPOINTS\s+BY\s+UPDATED/m);
  assert.match(ls.stdout, /^deploy\s+3\s+0\s+admin\s/m);
  const shown = ok(await server.cli(["graph", "show", "deploy"]));
  assert.deepEqual(JSON.parse(shown.stdout), JSON.parse(DEPLOY), "show prints the document as it was set");

  // A draft was saved although none of its credentials exists: all missing.
  // Not ready: the report is printed and the command exits 1 (it gates a submit in a script).
  const report = async () => {
    const r = await server.cli(["graph", "requirements", "deploy", "--json"]);
    assert.equal(r.code, 1, r.stderr);
    return JSON.parse(r.stdout) as {
      ready: boolean;
      credentials: Array<{ node_id: string; name: string; required_kind?: string; stored_kind?: string; state: string }>;
    };
  };
  const first = await report();
  assert.equal(first.ready, false);
  assert.deepEqual(
    first.credentials.map((c) => [c.node_id, c.name, c.state]),
    [
      ["fetch", "gh", "missing"],
      ["build", "reg", "missing"],
      ["src", "basic1", "missing"],
    ],
  );
  ok(await server.cli(["credential", "set", "gh", "--kind", "bearer", "--token", "-"], { input: "tok-1" }));
  ok(await server.cli(["credential", "set", "basic1", "--kind", "basic", "--username", "u", "--password", "-"], { input: "pw" }));
  const project = await db.query<{ id: string }>(`select id from projects where name = 'default'`);
  await db.query(`insert into connection_names (project_id, name, holder) values ($1, 'reg', 'account')`, [project.rows[0]!.id]);
  await db.query(
    `insert into accounts (project_id, name, provider, far_id, far_label, granter_id, status, sealed)
     values ($1, 'reg', 'github', '1', 'octo', (select user_id from memberships where project_id = $1 limit 1), 'needs_reauth', '\\x00')`,
    [project.rows[0]!.id],
  );
  const second = await report();
  assert.deepEqual(
    second.credentials.map((c) => [c.node_id, c.name, c.required_kind ?? "any", c.stored_kind ?? "-", c.state]),
    [
      ["fetch", "gh", "any", "bearer", "ok"],
      ["build", "reg", "any", "bearer", "needs_reconnect"],
      ["src", "basic1", "bearer|url_token", "basic", "wrong_kind"],
    ],
  );
  const table = await server.cli(["graph", "requirements", "deploy"]);
  assert.equal(table.code, 1, table.stderr);
  assert.match(table.stdout, /^NODE\s+NAME\s+REQUIRED KIND\s+STORED KIND\s+STATE/m);
  assert.match(table.stdout, /^src\s+basic1\s+bearer\|url_token\s+basic\s+wrong_kind/m);
  assert.match(table.stderr, /graph deploy is not ready/);

  // A submit of the stored graph by name is refused on the same resolver (the engine's submit path).
  const submit = await fetch(`${server.url}/api/v1/orgs/default/projects/default/runs`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: JSON.stringify({ graph: "deploy" }),
  });
  assert.equal(submit.status, 400);
  assert.match(((await submit.json()) as { error: { message: string } }).error.message, /node src: credential "basic1" is basic/);

  // Refusals: a bad document names its path; a file that is not JSON is refused before any request.
  const bad = await server.cli(["graph", "set", "bad", await kit.script("bad.json", doc([{ id: "a", type: "http", config: {} }]))]);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /error: nodes\[0\]\.config\.url: required/);
  const notJson = await server.cli(["graph", "set", "bad", await kit.script("bad2.json", "{nope")]);
  assert.notEqual(notJson.code, 0);
  assert.match(notJson.stderr, /error: .*bad2\.json: not valid JSON/);

  ok(await server.cli(["graph", "rm", "deploy"]));
  const gone = await server.cli(["graph", "show", "deploy"]);
  assert.notEqual(gone.code, 0);
  assert.match(gone.stderr, /error: graph deploy is not stored in/);
});

test("a stored graph started by its trigger endpoint: a workflow child, an event node, a webhook node woken by its endpoint", async () => {
  ok(
    await server.cli([
      "graph",
      "set",
      "child",
      await kit.script("child.json", doc([{ id: "say", type: "emit", config: { type: "child.said" } }])),
    ]),
  );
  const hooked = doc(
    [
      { id: "start", type: "trigger", config: {} },
      { id: "sub", type: "workflow", config: { graph: "child", input: { from: { $expr: "nodes.start.output.payload.body.who" } } } },
      { id: "ev", type: "event", config: { event: "deploy.done", when: "event.payload.ok == true", timeout: "10m" } },
      { id: "cb", type: "webhook", config: {} },
    ],
    [
      ["start", "sub"],
      ["sub", "ev"],
      ["ev", "cb"],
    ],
  );
  const set = ok(await server.cli(["graph", "set", "hooked", await kit.script("hooked.json", hooked)]));
  const urls = [...set.stdout.matchAll(/^ingest URL:\s+(\S+)/gm)].map((m) => m[1]!);
  const secrets = [...set.stdout.matchAll(/^secret:\s+(fhs_\S+)/gm)].map((m) => m[1]!);
  assert.equal(urls.length, 2, set.stdout);
  assert.equal(secrets.length, 2, set.stdout);
  assert.match(set.stdout, /^emits:\s+graph\.hooked\.start\.delivery$/m);
  const again = ok(await server.cli(["graph", "set", "hooked", await kit.script("hooked.json", hooked)]));
  assert.ok(!/fhs_/.test(again.stdout), "a second set shows no secret");
  const post = (url: string, secret: string | undefined, body: unknown) =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...(secret ? { "x-flow-hook-secret": secret } : {}) },
      body: JSON.stringify(body),
    });
  assert.equal((await post(urls[0]!, undefined, {})).status, 401);
  const started = await post(urls[0]!, secrets[0], { who: "ada" });
  assert.equal(started.status, 202);
  const { run_id: run } = (await started.json()) as { run_id: string };
  await waitFor(
    "the run parks on its event node",
    kit.parked(run, (n) => n === "ev"),
    30_000,
  );
  ok(await server.cli(["emit", "deploy.done", "--payload", '{"ok":false}']));
  ok(await server.cli(["emit", "deploy.done", "--payload", '{"ok":true}']));
  await waitFor(
    "the run parks on its webhook node",
    kit.parked(run, (n) => n === "cb"),
    30_000,
  );
  assert.equal((await post(urls[1]!, secrets[1], { approved: "yes" })).status, 202);
  assert.equal(await ended(server, run), "succeeded");
  const v = await kit.json<{ nodes: Array<{ node_id: string; status: string; output: Record<string, unknown> | null }> }>(["status", run]);
  const out = (id: string) => v.nodes.find((n) => n.node_id === id)?.output ?? {};
  assert.deepEqual((out("start")["payload"] as { body: unknown }).body, { who: "ada" });
  assert.deepEqual(out("ev")["payload"], { ok: true }, "the declined event did not wake it");
  assert.deepEqual((out("cb")["payload"] as { body: unknown }).body, { approved: "yes" });
  const child = await db.query<{ status: string; input: unknown }>(`select status, input from runs where parent_run_id = $1`, [run]);
  assert.deepEqual(child.rows, [{ status: "succeeded", input: { from: "ada" } }]);

  ok(await server.cli(["graph", "rm", "hooked"]));
  assert.equal((await post(urls[0]!, secrets[0], {})).status, 404, "the endpoint died with its graph");
});

test("private refused: http nodes naming a peer by localhost or a mapped literal fail with why, and the peer gets no request", async () => {
  const base = `localhost:${metadataPort}/latest/meta-data/iam/security-credentials`;
  const steal = doc([
    { id: "by_name", type: "http", config: { url: `http://${base}/node-role?x=1` } },
    { id: "by_literal", type: "http", config: { url: `http://[::ffff:7f00:1]:${metadataPort}/latest/meta-data/` } },
  ]);
  const run = runIdIn(ok(await server.cli(["submit", await kit.script("steal.json", steal)])).stdout);
  assert.equal(await ended(server, run), "failed");
  const v = await kit.json<{ nodes: Array<{ node_id: string; error: string | null }> }>(["status", run]);
  const errorOf = (id: string): string => v.nodes.find((n) => n.node_id === id)?.error ?? "";
  assert.match(
    errorOf("by_name"),
    /^config\.url: localhost resolves to (127\.0\.0\.1|::1), a loopback address; http nodes may not reach loopback addresses here \(set FLOWSVC_HTTP_ALLOW_CIDRS or FLOWSVC_HTTP_ALLOW_PRIVATE\); nothing was sent$/,
  );
  assert.match(errorOf("by_literal"), /^config\.url: ::ffff:7f00:1 \(IPv4 127\.0\.0\.1\) is a loopback address;/);
  assert.ok(!JSON.stringify(v.nodes).includes("meta-data"), "no path or query in the nodes' errors");
  assert.deepEqual(stolen, [], "the peer got no request");
});
