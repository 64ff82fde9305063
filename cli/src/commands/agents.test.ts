/**
 * User commands in process (runCli) against the ingest app listening on 127.0.0.1 with a test
 * database (one app for the file): `flow agents ls`'s table and `-o json` show an agent that holds a
 * job; `flow cancel --reason` takes a long reason and keeps its tail, and refuses one over the bound
 * naming it; `flow graph requirements` exits 1 while the graph is not ready and 0 once it is, the
 * report printed either way.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ask, createTestApp, startScriptJob, type TestApp } from "@flowsvc/ingest/testing";
import { captureStdio } from "../testing/capture-stdio.js";
import { runCli } from "./program.js";

let t: TestApp;
let url: string;
before(async () => {
  t = await createTestApp();
  url = await t.app.listen({ host: "127.0.0.1", port: 0 });
});
after(() => t.close());

const flow = async (args: string[], token = t.tokens.viewer): Promise<{ code: number; out: string; err: string }> => {
  const { io, out, err } = captureStdio();
  const env = { FLOWSVC_URL: url, FLOWSVC_TOKEN: token, FLOWSVC_PROJECT: `${t.project.org}/p`, HOME: "/nonexistent" };
  const code = await runCli(["node", "flow", ...args], { env, io, now: () => new Date() });
  return { code, out: out.join("\n"), err: err.join("\n") };
};

test("flow agents ls prints the agents as a table and as JSON", async () => {
  const empty = await flow(["agents", "ls"]);
  assert.deepEqual([empty.code, empty.out], [0, ""]);
  assert.match(empty.err, /no agents/);

  const job = await startScriptJob(t, "echo hi\n");
  const claim = await ask(t, "POST", "/agent/v1/claim", { as: { token: job.token }, body: { agent_id: "agt-cli-test" } });
  assert.equal(claim.status, 200, claim.text);

  const table = await flow(["agents", "ls"]);
  assert.equal(table.code, 0, table.err);
  assert.match(table.out, /^ID +STATUS +CAPABILITIES +RUN +PROJECT +LAST SEEN\n/);
  assert.match(table.out, new RegExp(`agt-cli-test +busy +- +${job.runId} +${t.project.org}/p +(now|\\d+s ago)`));

  const json = await flow(["agents", "ls", "-o", "json"]);
  assert.equal(json.code, 0, json.err);
  const agents = JSON.parse(json.out) as Array<{ id: string; status: string; run_id: string }>;
  assert.deepEqual(
    agents.map((a) => [a.id, a.status, a.run_id]),
    [["agt-cli-test", "busy", job.runId]],
  );

  const refused = await flow(["agents", "ls", "--token", "flw_" + "A".repeat(43)]);
  assert.equal(refused.code, 1);
  assert.match(refused.err, /error: the API token is not valid for this server/);
});

const queuedRun = async (): Promise<string> =>
  (
    (await ask(t, "POST", `${t.project.base}/runs`, { body: { kind: "script", source: "true\n", filename: "q.sh" } })).body as {
      id: string;
    }
  ).id;

test("flow cancel --reason of 10,000 characters cancels, keeping the last 4000; 70,000 is refused naming the bound, exit 2", async () => {
  const id = await queuedRun();
  const tooLong = await flow(["cancel", id, "--reason", "x".repeat(70_000)], t.tokens.member);
  assert.equal(tooLong.code, 2, tooLong.err);
  assert.match(tooLong.err, /^error: reason: is longer than 65536 characters, the most a cancel reason may be/);
  const reason = `${"a".repeat(6000)}${"b".repeat(3990)}superseded`;
  const r = await flow(["cancel", id, "--reason", reason], t.tokens.member);
  assert.deepEqual([r.code, r.out], [0, `${id} cancelled`], r.err);
  const { rows } = await t.db.pool.query<{ reason: string }>(
    `select payload->>'reason' as reason from events where type = 'run.cancelled' and payload->>'run_id' = $1`,
    [id],
  );
  assert.deepEqual(rows, [{ reason: reason.slice(-4000) }]);
});

test("flow graph requirements exits 1 while the graph is not ready and 0 once it is, printing the report either way", async () => {
  const document = {
    version: "flowsvc-graph/v1",
    nodes: [{ id: "fetch", type: "http", config: { url: "https://api.example/x", credential: "gh" } }],
  };
  assert.equal(
    (await ask(t, "PUT", `${t.project.base}/graphs/deploy`, { as: "admin", body: { document: { ...document, edges: [] } } })).status,
    201,
  );

  const table = await flow(["graph", "requirements", "deploy"]);
  assert.equal(table.code, 1, table.err);
  assert.match(table.out, /^NODE +NAME +REQUIRED KIND +STORED KIND +STATE\nfetch +gh +any +- +missing\n$/);
  assert.match(table.err, /graph deploy is not ready: a submit of it is refused until every credential is ok$/);
  assert.doesNotMatch(table.err, /^error:/m);
  const json = await flow(["graph", "requirements", "deploy", "--json"]);
  assert.equal(json.code, 1, json.err);
  assert.equal((JSON.parse(json.out) as { ready: boolean }).ready, false);

  assert.equal(
    (await ask(t, "PUT", `${t.project.base}/credentials/gh`, { as: "admin", body: { kind: "bearer", token: "t-1" } })).status < 300,
    true,
  );
  const ready = await flow(["graph", "requirements", "deploy"]);
  assert.equal(ready.code, 0, ready.err);
  assert.match(ready.out, /^fetch +gh +any +bearer +ok$/m);
  assert.match(ready.err, /graph deploy is ready/);
  const readyJson = await flow(["graph", "requirements", "deploy", "--json"]);
  assert.deepEqual([readyJson.code, (JSON.parse(readyJson.out) as { ready: boolean }).ready], [0, true]);
  const missing = await flow(["graph", "requirements", "nope"]);
  assert.equal(missing.code, 1);
  assert.match(missing.err, /^error: graph nope is not stored/);
});
