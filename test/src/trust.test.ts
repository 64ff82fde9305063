/**
 * Untrusted is contagious, end to end (SECURITY.md "Untrusted is contagious"; core/src/trust.ts):
 * a fork's pull request from the test forge, signed as GitHub signs, starts a handler run on the
 * real server; what that run starts with `flow spawn`, `flow emit` and `flow activity`, and a
 * person's run that takes its event with `flow wait-event`, must not see the project's secret.
 * The same repository's pull request is the trusted counterpart: the same chain sees it.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import { request } from "undici";
import { TestForge } from "./forge/forge.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

const SECRET = "trust-e2e-S3cret-4711";
const scoped = "/api/v1/orgs/default/projects/default";
const GH_KEY = "trust-gh-key-9931";

let server: TestServer;
let db: pg.Pool;
let forge: TestForge;

const api = async (
  path: string,
  method: "GET" | "PUT" | "POST" = "GET",
  body?: unknown,
): Promise<{ status: number; text: string; json: Record<string, unknown> }> => {
  const res = await request(`${server.url}${scoped}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? null : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, text, json: text.startsWith("{") ? (JSON.parse(text) as Record<string, unknown>) : {} };
};

/** Each script prints how long the secret it sees is: a length is not masked, so the log says what the env held. */
const probe = (who: string): string => `t="\${API_TOKEN:-}"; echo "${who} len=\${#t}"\n`;

// The fork's handler: it spawns a child, runs an activity, and emits an event another handler serves.
const PR_HANDLER = [
  probe("handler"),
  `printf '%s' '${probe("child")}' | flow spawn - --tag trust-child >/dev/null`,
  `a=$(flow activity probe -- bash -c '${probe("activity").trim()}'); echo "from $a"`,
  `flow emit trust.relay --payload '{"from":"pr"}' >/dev/null`,
].join("\n");

before(async () => {
  server = await startTestServer({ env: { FLOWSVC_AGENT_POOLS: "polyglot:3" } });
  db = new pg.Pool({ connectionString: server.databaseUrl, max: 2 });
  assert.equal((await server.cli(["secret", "set", "API_TOKEN", SECRET])).code, 0);
  const hook = await server.cli(["event-hook", "set", "gh", "--manifest", "github", "--key", GH_KEY, "-o", "json"]);
  assert.equal(hook.code, 0, hook.stderr);
  forge = new TestForge({ url: (JSON.parse(hook.stdout) as { ingest_url: string }).ingest_url, key: GH_KEY });
  for (const [name, on, source] of [
    ["pr", ["gh.pull_request.*"], PR_HANDLER],
    ["relay", ["trust.relay"], probe("relay")],
  ] as const) {
    const r = await api(`/handlers/${name}`, "PUT", { on, reaction: { kind: "script", source, filename: `${name}.sh` } });
    assert.equal(r.status, 201, r.text);
  }
});

after(async () => {
  await db?.end();
  await server?.stop();
});

const one = async (what: string, sql: string, params: unknown[]): Promise<{ id: string; trusted: boolean }> => {
  let row: { id: string; trusted: boolean } | undefined;
  await waitFor(what, async () => (row = (await db.query<{ id: string; trusted: boolean }>(sql, params)).rows[0]) !== undefined);
  return row!;
};

const finished = async (runId: string): Promise<string> => {
  await waitFor(
    `run ${runId} to finish`,
    async () =>
      (await db.query(`select 1 from runs where id = $1 and status in ('succeeded', 'failed', 'cancelled')`, [runId])).rowCount === 1,
    60_000,
  );
  const log = (await api(`/runs/${runId}/log`)).text;
  assert.equal(log.includes(SECRET), false, `run ${runId}'s log holds the secret`);
  return log;
};

/** Sends a pull request and follows the chain it starts: handler run, spawned child, relay handler run. */
const chainOf = async (headRepo: string) => {
  const sent = await forge.send(forge.pullRequest({ repo: "acme/web", headRepo, sender: headRepo.split("/")[0]! }));
  assert.equal(sent.status, 202, sent.text);
  const eventId = (sent.json as { event_id: string }).event_id;
  const handler = await one("the pull request's handler run", `select id, trusted from runs where event_id = $1 and handler_name = 'pr'`, [
    eventId,
  ]);
  const handlerLog = await finished(handler.id);
  const child = await one("the spawned child", `select id, trusted from runs where parent_run_id = $1`, [handler.id]);
  const relay = await one(
    "the relay handler run",
    `select r.id, r.trusted from runs r join events e on e.id = r.event_id where e.source_run_id = $1 and e.type = 'trust.relay'`,
    [handler.id],
  );
  const relayEvent = await one("the relay event", `select id, trusted from events where source_run_id = $1 and type = 'trust.relay'`, [
    handler.id,
  ]);
  return { handler, handlerLog, child, childLog: await finished(child.id), relay, relayLog: await finished(relay.id), relayEvent };
};

void test("a fork's pull request: what its handler run spawns, emits and runs as an activity gets no secret; the same repo's gets it", async () => {
  const fork = await chainOf("mallory/web");
  assert.match(fork.handlerLog, /handler len=0\n/);
  assert.match(fork.handlerLog, /from activity len=0\n/);
  assert.match(fork.childLog, /child len=0\n/);
  assert.match(fork.relayLog, /relay len=0\n/);
  assert.deepEqual([fork.handler.trusted, fork.child.trusted, fork.relayEvent.trusted, fork.relay.trusted], [false, false, false, false]);

  const own = await chainOf("acme/web");
  const len = `len=${SECRET.length}\n`;
  assert.ok(own.handlerLog.includes(`handler ${len}`), own.handlerLog);
  assert.ok(own.handlerLog.includes(`from activity ${len}`), own.handlerLog);
  assert.ok(own.childLog.includes(`child ${len}`), own.childLog);
  assert.ok(own.relayLog.includes(`relay ${len}`), own.relayLog);
  assert.deepEqual([own.handler.trusted, own.child.trusted, own.relayEvent.trusted, own.relay.trusted], [true, true, true, true]);
});

void test("a person's run that takes a fork-started event with flow wait-event gets no secret from then on", async () => {
  const source = `${probe("before")}flow wait-event trust.relay >/dev/null\n${probe("after")}`;
  const submitted = await api("/runs", "POST", { kind: "script", source, filename: "waiter.sh" });
  assert.equal(submitted.status, 201, submitted.text);
  const runId = submitted.json["id"] as string;
  await waitFor(
    "the waiter to park on trust.relay",
    async () =>
      (await db.query(`select 1 from runs where id = $1 and status = 'parked' and substate->>'kind' = 'wait-event'`, [runId])).rowCount ===
      1,
  );
  assert.equal((await db.query<{ trusted: boolean }>(`select trusted from runs where id = $1`, [runId])).rows[0]!.trusted, true);

  await chainOf("mallory/web");
  const log = await finished(runId);
  // The first pass ran trusted, before the event; the pass that took the event and the rest did not.
  assert.ok(log.includes(`before len=${SECRET.length}\n`), log);
  assert.match(log, /before len=0\nafter len=0\n/);
  assert.equal((await db.query<{ trusted: boolean }>(`select trusted from runs where id = $1`, [runId])).rows[0]!.trusted, false);
});
