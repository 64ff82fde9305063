/**
 * The node context's credential resolution (context.ts) on a real Postgres with a connected account,
 * driving the http executor against a local peer: a usable account's token arrives as a bearer
 * header; an account to reconnect fails the node with the reconnect message and nothing is sent.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { createEgressAgent } from "../net/egress-agent.js";
import { defaultEgressPolicy } from "../net/egress-policy.js";
import {
  Keyring,
  addTestOrgKey,
  createTestDatabase,
  createTestProject,
  createUserWithToken,
  mintId,
  mintToken,
  saveGrantedAccount,
  setCredential,
  type GraphRunRow,
  type TestDatabase,
} from "@flowsvc/store";
import type { AccountStatus, GraphNode } from "@flowsvc/core";
import { nodeContext } from "./context.js";
import { emitExecutor } from "./nodes/emit.js";
import { httpExecutor } from "./nodes/http.js";
import type { NodeOutcome } from "./nodes/types.js";

let db: TestDatabase;
let keyring: Keyring;
let server: Server;
let base = "";
let scope: { orgId: string; projectId: string };
let run: GraphRunRow;
const seen: IncomingHttpHeaders[] = [];
/** Local mode's policy: the peer on 127.0.0.1 may be reached. */
const egress = createEgressAgent(defaultEgressPolicy("local"));

before(async () => {
  db = await createTestDatabase();
  keyring = await Keyring.create(db.pool, randomBytes(32));
  scope = await createTestProject(db.pool);
  await addTestOrgKey(db.pool, keyring, scope.orgId);
  const userId = mintId("usr");
  await createUserWithToken(
    db.pool,
    { userId, tokenId: mintId("tok") },
    { name: "ada", projectId: scope.projectId, role: "admin", tokenDigest: mintToken("flw").digest },
  );
  for (const name of ["gh", "stale"])
    await saveGrantedAccount(db.pool, keyring, {
      scope,
      name,
      provider: "gh",
      farId: `far-${name}`,
      farLabel: name,
      granterId: userId,
      tokens: { access_token: `acc-${name}-token`, refresh_token: `ref-${name}` },
      expiresAtMs: null,
      refreshAfterMs: null,
    });
  run = {
    id: mintId("run"),
    project_id: scope.projectId,
    workflow: "flowsvc-graph/v1",
    status: "running",
    source: "{}",
    graph: "{}",
    job_groups: null,
    filename: "graph:g",
    input: {},
    trusted: true,
    parent_run_id: null,
  };
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted)
     values ($1, $2, 'flowsvc-graph/v1', 'running', '{}', 'graph:g', '{}', '{}', true)`,
    [run.id, scope.projectId],
  );
  server = createServer((req, res) => {
    seen.push(req.headers);
    res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  await egress.close();
  server?.closeAllConnections();
  server?.close();
  await db?.drop();
});

/** A node's context as the driver makes it, for this file's run. */
const contextFor = (node: GraphNode, config: Record<string, unknown>) =>
  nodeContext({
    pool: db.pool,
    keyring,
    logger: pino({ level: "silent" }),
    publicUrl: undefined,
    egress,
    run,
    node,
    config,
    scope: {} as never,
    attempt: 1,
    signal: new AbortController().signal,
    orgs: new Map(),
  });

const callWith = async (credential: string): Promise<NodeOutcome> => {
  const node: GraphNode = { id: "call", type: "http", config: { url: `${base}/x`, credential } };
  return httpExecutor.start(await contextFor(node, node.config));
};

const setStatus = (name: string, status: AccountStatus) =>
  db.pool.query(`update accounts set status = $3 where project_id = $1 and name = $2`, [scope.projectId, name, status]);

void test("an http node naming an active or refreshing account sends its access token as a bearer header", async () => {
  for (const status of ["active", "refreshing"] as const) {
    await setStatus("gh", status);
    const o = await callWith("gh");
    assert.equal(o.kind, "succeeded", JSON.stringify(o));
    assert.equal(seen.at(-1)?.authorization, "Bearer acc-gh-token", status);
  }
});

void test("an http node naming an account to reconnect fails closed with the reconnect message; nothing is sent", async () => {
  const before = seen.length;
  for (const status of ["needs_reauth", "in_doubt", "disabled"] as const) {
    await setStatus("stale", status);
    await assert.rejects(callWith("stale"), (e: Error) => {
      assert.match(e.message, new RegExp(`connected account "stale" is ${status}: reconnect it on the Connections page`));
      return true;
    });
  }
  // A name nothing holds, and an untrusted run, fail the same way before any request.
  await assert.rejects(callWith("nothing"), /credential "nothing" is not set in this project/);
  run = { ...run, trusted: false };
  await setStatus("gh", "active");
  await assert.rejects(callWith("gh"), /untrusted event and gets no credentials/);
  run = { ...run, trusted: true };
  assert.equal(seen.length, before, "no request reached the peer");
});

void test("an emit node's event is stored masked, as a script's emit is: a credential a far side echoed never reaches the bus", async () => {
  await setCredential(db.pool, keyring, { scope, name: "api", value: { kind: "bearer", token: "tok-emit-4417" } });
  // What an http node's output may hold when the far side echoes the request (nodes.fetch.output.body).
  const node: GraphNode = { id: "note", type: "emit", config: {} };
  const config = { type: "item.checked", key: "k-tok-emit-4417", payload: { auth: "Bearer tok-emit-4417", n: [1, "tok-emit-4417"] } };
  const ctx = await contextFor(node, config);
  const o = await emitExecutor.start(ctx);
  assert.equal(o.kind, "succeeded", JSON.stringify(o));
  const { rows } = await db.pool.query<{ key: string; payload: unknown }>(`select key, payload from events where type = 'item.checked'`);
  assert.deepEqual(rows, [{ key: "k-***", payload: { auth: "Bearer ***", n: [1, "***"] } }]);
});
