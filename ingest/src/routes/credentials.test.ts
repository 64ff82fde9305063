/**
 * The credentials plugin (routes/credentials.ts) over app.inject(), and what a run's `credentials`
 * become at claim (routes/agent-claim.ts): write-only typed values, one name space with connected
 * accounts, fail-closed resolution, masking.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createRun, setRunCredentials, withTransaction } from "@flowsvc/store";
import {
  ask,
  assertCallerRefusals,
  assertError,
  countRows,
  createTestApp,
  dispatchJob,
  type Answer,
  type TestApp,
  type TestJob,
} from "../testing/test-app.js";

let t: TestApp;
let creds: string;
before(async () => {
  t = await createTestApp();
  creds = `${t.project.base}/credentials`;
});
after(() => t.close());

const TOKEN = "tok-that-must-not-leak-1";
const KEY = "key-that-must-not-leak-2";
const PASSWORD = "pw-that-must-not-leak-3";

const set = (name: string, body: unknown, as: "admin" | "member" = "admin"): Promise<Answer> =>
  ask(t, "PUT", `${creds}/${name}`, { as, body });

const claim = (job: TestJob): Promise<Answer> =>
  ask(t, "POST", "/agent/v1/claim", { as: { token: job.token }, body: { agent_id: "agent-1" } });

const submit = async (body: Record<string, unknown>): Promise<Answer> =>
  ask(t, "POST", `${t.project.base}/runs`, { body: { kind: "script", source: "echo hi\n", filename: "job.sh", ...body } });

const submitted = async (body: Record<string, unknown>): Promise<TestJob> => {
  const res = await submit(body);
  assert.equal(res.status, 201, res.text);
  return dispatchJob(t, (res.body as { id: string }).id);
};

const runView = async (runId: string) =>
  (await ask(t, "GET", `${t.project.base}/runs/${runId}`, { as: "viewer" })).body as { status: string; error: string | null };

test("an admin sets each kind; list and show give name, kind and set time only; the value is sealed; rm frees the name", async () => {
  const answers = [
    await set("gh", { kind: "bearer", token: TOKEN }),
    await set("llm", { kind: "api-key", header: "x-api-key", value: KEY }),
    await set("reg", { kind: "basic", username: "ci", password: PASSWORD }),
    await set("hook", { kind: "url_token", token: TOKEN }),
  ];
  for (const a of answers) assert.equal(a.status, 200, a.text);
  assert.deepEqual(
    answers.map((a) => (a.body as { kind: string }).kind),
    ["bearer", "api_key", "basic", "url_token"],
  );
  const list = await ask(t, "GET", creds, { as: "viewer" });
  assert.deepEqual(
    (list.body as Array<Record<string, unknown>>).map((c) => [c["name"], c["kind"], Object.keys(c).sort().join()]),
    [
      ["gh", "bearer", "kind,name,set_at"],
      ["hook", "url_token", "kind,name,set_at"],
      ["llm", "api_key", "kind,name,set_at"],
      ["reg", "basic", "kind,name,set_at"],
    ],
  );
  const show = await ask(t, "GET", `${creds}/reg`, { as: "viewer" });
  assert.deepEqual(Object.keys(show.body as object).sort(), ["kind", "name", "set_at"]);
  for (const res of [...answers, list, show])
    for (const secret of [TOKEN, KEY, PASSWORD, "x-api-key", "ci"])
      assert.ok(!res.text.includes(`"${secret}`), `an answer carries ${secret}`);
  const { rows } = await t.db.pool.query<{ sealed: Buffer }>(`select sealed from credentials`);
  for (const r of rows)
    for (const secret of [TOKEN, KEY, PASSWORD]) assert.ok(!r.sealed.toString("latin1").includes(secret), "stored sealed");

  // Set again replaces, also with another kind.
  assert.equal((await set("hook", { kind: "bearer", token: "other" })).status, 200);
  assert.equal(((await ask(t, "GET", `${creds}/hook`, { as: "viewer" })).body as { kind: string }).kind, "bearer");
  assert.equal((await ask(t, "DELETE", `${creds}/hook`, { as: "admin" })).status, 204);
  assertError(await ask(t, "GET", `${creds}/hook`, { as: "viewer" }), 404, /credential hook is not set in/);
  assertError(await ask(t, "DELETE", `${creds}/hook`, { as: "admin" }), 404, /credential hook is not set in/);
  assert.equal(await countRows(t, "connection_names where name = 'hook'"), 0, "rm frees the name");
});

test("credential routes refuse callers: no token, a forged token, a role below, a non-member", async () => {
  await assertCallerRefusals(t, { method: "GET", url: creds }, "viewer");
  await assertCallerRefusals(t, { method: "PUT", url: `${creds}/x`, body: { kind: "bearer", token: TOKEN } }, "admin");
  await assertCallerRefusals(t, { method: "DELETE", url: `${creds}/gh` }, "admin");
  assert.equal((await ask(t, "GET", `${creds}/gh`, { as: "viewer" })).status, 200, "the refused delete removed nothing");
  assertError(await ask(t, "GET", `${t.other.base}/credentials/gh`, { as: "outsider" }), 404, /credential gh is not set in/);
});

test("bad kinds, fields, names and values are refused with what and where, nothing written, the value never quoted", async () => {
  const cases: Array<[string, unknown, RegExp]> = [
    ["c1", { kind: "oauth", token: TOKEN }, /credential c1: kind: must be one of bearer, api-key, basic, url-token; got "oauth"/],
    ["c1", { token: TOKEN }, /kind: .*no kind was given/],
    ["c1", { kind: "bearer" }, /token: required for a bearer credential/],
    ["c1", { kind: "bearer", token: TOKEN, header: "X" }, /header: a bearer credential has no such field/],
    ["c1", { kind: "api-key", value: TOKEN, header: "Host" }, /header: header "Host" frames the request/],
    ["c1", { kind: "basic", username: "a:b", password: TOKEN }, /username: .*":"/],
    ["c1", { kind: "bearer", token: `${TOKEN}\r\nX-Evil: 1` }, /token: .*control character/],
    ["c1", { kind: "bearer", token: "x".repeat(70_000) + TOKEN }, /token: a credential value is at most 65536 bytes/],
    ["c1", { kind: "bearer", token: 7 }, /token: must be a JSON string/],
    ["-c1", { kind: "bearer", token: TOKEN }, /credential name "-c1" is not allowed/],
    ["c%2F1", { kind: "bearer", token: TOKEN }, /credential name "c\/1" is not allowed/],
  ];
  const before = [await countRows(t, "credentials"), await countRows(t, "connection_names")];
  for (const [name, body, want] of cases) {
    const res = await set(name, body);
    assertError(res, 400, want, `set ${name} ${JSON.stringify(body).slice(0, 80)}`);
    assert.ok(!res.text.includes(TOKEN), "a refusal never quotes the value");
  }
  // JSON Postgres cannot store (a lone surrogate, a NUL) is refused by the app's input guard.
  for (const raw of ['{"kind":"bearer","token":"\\ud800x"}', '{"kind":"bearer","token":"a\\u0000b"}']) {
    const res = await ask(t, "PUT", `${creds}/c1`, { as: "admin", body: raw });
    assert.equal(res.status, 400, res.text);
  }
  assert.deepEqual([await countRows(t, "credentials"), await countRows(t, "connection_names")], before, "nothing was written");
});

test("a name held by a connected account is refused for a credential: one name space", async () => {
  await t.db.pool.query(`insert into connection_names (project_id, name, holder) values ($1, 'slack', 'account')`, [t.project.projectId]);
  const res = await set("slack", { kind: "bearer", token: TOKEN });
  assertError(res, 409, /the name slack is already taken by a connected account in this project/);
  assert.equal(await countRows(t, "credentials where name = 'slack'"), 0);
  assertError(await ask(t, "DELETE", `${creds}/slack`, { as: "admin" }), 404, /credential slack is not set/);
  assert.equal(await countRows(t, "connection_names where name = 'slack'"), 1, "rm of a credential leaves an account's name alone");
});

test("a submit's credentials reach the claim by the spec's precedence, masked; nothing but names is stored in the run", async () => {
  assert.equal((await ask(t, "PUT", `${t.project.base}/secrets/GH_TOKEN`, { as: "admin", body: { value: "from-secret" } })).status, 200);
  const job = await submitted({ env: { GH_TOKEN: "from-env", PLAIN: "p" }, credentials: { GH_TOKEN: "gh", REG: "reg", KEY: "llm" } });
  const { rows } = await t.db.pool.query<{ credentials: unknown; env: unknown }>(`select credentials, env from runs where id = $1`, [
    job.runId,
  ]);
  assert.deepEqual(rows[0]!.credentials, { GH_TOKEN: "gh", REG: "reg", KEY: "llm" });
  const claimed = await claim(job);
  assert.equal(claimed.status, 200, claimed.text);
  const c = claimed.body as { env: Record<string, string>; masks: string[] };
  assert.equal(c.env["GH_TOKEN"], TOKEN, "a named credential wins over a secret and a literal env var");
  assert.equal(c.env["REG"], `ci:${PASSWORD}`);
  assert.equal(c.env["KEY"], KEY);
  assert.equal(c.env["PLAIN"], "p");
  for (const m of [TOKEN, KEY, PASSWORD, `ci:${PASSWORD}`]) assert.ok(c.masks.includes(m), `masks ${m}`);
  // What the run writes back is masked with the credentials too.
  const agentAsk = (path: string, body: unknown) => ask(t, "POST", `/agent/v1/${path}`, { as: { token: job.token }, body });
  const stepResult = { stdout_b64: Buffer.from("built").toString("base64"), exit: 0 };
  assert.equal((await agentAsk("journal", { position: 0, kind: "step", name: "build", ordinal: 0, result: stepResult })).status, 200);
  assert.equal((await agentAsk("annotate", { markdown: `token ${TOKEN} key ${KEY}` })).status, 200);
  const fin = await agentAsk("finish", { exit_code: 0, outputs: { pw: PASSWORD }, duration_ms: 1 });
  assert.equal(fin.status, 200, fin.text);
  const view = await ask(t, "GET", `${t.project.base}/runs/${job.runId}`, { as: "viewer" });
  for (const secret of [TOKEN, KEY, PASSWORD]) assert.ok(!view.text.includes(secret), `the run shows ${secret}`);
  assert.match(view.text, /token \*\*\* key \*\*\*/);
  // A rerun declares what its run declared (names only), and its claim resolves them again.
  const rerun = await ask(t, "POST", `${t.project.base}/runs/${job.runId}/rerun`, { body: { from: "build" } });
  assert.equal(rerun.status, 201, rerun.text);
  const rerunId = (rerun.body as { id: string }).id;
  const copied = await t.db.pool.query<{ credentials: unknown }>(`select credentials from runs where id = $1`, [rerunId]);
  assert.deepEqual(copied.rows[0]!.credentials, { GH_TOKEN: "gh", REG: "reg", KEY: "llm" });
  const again = await claim(await dispatchJob(t, rerunId));
  assert.equal(again.status, 200, again.text);
  assert.equal((again.body as { env: Record<string, string> }).env["GH_TOKEN"], TOKEN);
  await ask(t, "DELETE", `${t.project.base}/secrets/GH_TOKEN`, { as: "admin" });
});

test("a handler's --credential map is declared by each run it starts and resolved at its claim", async () => {
  const handler = await ask(t, "PUT", `${t.project.base}/handlers/notify`, {
    body: { on: ["cred.test"], reaction: { kind: "script", source: "echo hi\n", filename: "notify.sh" }, credentials: { CHAT: "gh" } },
  });
  assert.equal(handler.status, 201, handler.text);
  const emitted = await ask(t, "POST", `${t.project.base}/events`, { body: { type: "cred.test" } });
  assert.equal(emitted.status, 201, emitted.text);
  const [runId] = (emitted.body as { handler_runs: string[] }).handler_runs;
  assert.ok(runId);
  const claimed = await claim(await dispatchJob(t, runId));
  assert.equal(claimed.status, 200, claimed.text);
  assert.equal((claimed.body as { env: Record<string, string> }).env["CHAT"], TOKEN);
  assert.equal((await ask(t, "DELETE", `${t.project.base}/handlers/notify`, { as: "admin" })).status, 204);
});

test("a missing credential fails the job at claim: nothing handed out, the run failed with the reason in its log", async () => {
  const job = await submitted({ credentials: { GH_TOKEN: "gh", NOPE: "missing-one" } });
  const claimed = await claim(job);
  assertError(claimed, 409, /the job failed before it ran: its credentials do not resolve: NOPE: credential "missing-one" is not set/);
  assert.ok(!claimed.text.includes(TOKEN), "the refusal carries no value of the credentials that did resolve");
  const view = await runView(job.runId);
  assert.equal(view.status, "failed");
  assert.match(view.error ?? "", /NOPE: credential "missing-one" is not set in this project/);
  const log = await ask(t, "GET", `${t.project.base}/runs/${job.runId}/log`, { as: "viewer" });
  assert.match(log.text, /flowsvc: the job failed before it ran/);
  assertError(await claim(job), 409, /./, "a second claim of the failed job");
  assert.equal(await countRows(t, `events where type = 'run.started' and source_run_id = '${job.runId}'`), 0, "the run never started");
});

test("an untrusted run that declares a credential fails at claim and gets none", async () => {
  const runId = await withTransaction(t.db.pool, async (tx) => {
    const r = await createRun(tx, { projectId: t.project.projectId, source: "echo hi\n", filename: "job.sh", trusted: false });
    await setRunCredentials(tx, r.id, { GH_TOKEN: "gh" });
    return r.id;
  });
  const job = await dispatchJob(t, runId);
  const claimed = await claim(job);
  assertError(claimed, 409, /untrusted event and gets no credentials, but it declares GH_TOKEN=gh/);
  assert.ok(!claimed.text.includes(TOKEN));
  assert.equal((await runView(runId)).status, "failed");
});

test("a sealed value moved to another name does not open: the job fails instead of running with it", async () => {
  assert.equal((await set("copy", { kind: "bearer", token: "placeholder" })).status, 200);
  await t.db.pool.query(
    `update credentials set sealed = (select sealed from credentials where project_id = $1 and name = 'gh') where project_id = $1 and name = 'copy'`,
    [t.project.projectId],
  );
  const job = await submitted({ credentials: { T: "copy" } });
  assertError(await claim(job), 409, /T: credential "copy" does not open with this server's keys/);
});

test("a submit refuses credential variables the loader or shells read, and bad names, saying where; no run is created", async () => {
  const before = await countRows(t, "runs");
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ LD_PRELOAD: "gh" }, /credentials: LD_PRELOAD: credential variable "LD_PRELOAD" is refused: the dynamic loader/],
    [{ BASH_ENV: "gh" }, /credentials: BASH_ENV: .*a shell reads it/],
    [{ FLOW_AGENT_SOCKET: "gh" }, /credentials: FLOW_AGENT_SOCKET: .*reserved/],
    [{ "A-B": "gh" }, /credentials: A-B: credential variable "A-B" is not an environment variable name/],
    [{ OK: "../gh" }, /credentials: OK: credential name "..\/gh" is not allowed/],
    [{ OK: 1 }, /credentials\.OK: /],
  ];
  for (const [credentials, want] of cases) assertError(await submit({ credentials }), 400, want, JSON.stringify(credentials));
  assert.equal(await countRows(t, "runs"), before);
});
