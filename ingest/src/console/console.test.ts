/** The web console's pages over app.inject(): login, sessions, CSRF, hostile input, pages and the log window. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { ApprovalField } from "@flowsvc/core";
import { EventEmitter } from "node:events";
import type { IncomingMessage } from "node:http";
import {
  GRAPH_WORKFLOW,
  appendLogs,
  createRun,
  insertGraphNodes,
  startListener,
  updateGraphNode,
  waitFor,
  withTransaction,
} from "@flowsvc/store";
import { LogLineIndexes } from "../log-lines.js";
import { streamLogEvents } from "./log-events.js";
import { ask, connectTestAccount, createTestApp, type TestApp } from "../testing/test-app.js";
import { md } from "./html.js";
import { accountsAvailable, connectionsPage } from "./connections.js";
import { answerOf } from "./approvals.js";

let t: TestApp;
let runId: string;
const SECRET = "s3cr3t-console-value-9f1c";

/** The Set-Cookie values of a response, by name. */
const cookies = (res: { headers: Record<string, unknown> }): Record<string, string> => {
  const raw = res.headers["set-cookie"];
  const list = Array.isArray(raw) ? (raw as string[]) : typeof raw === "string" ? [raw] : [];
  return Object.fromEntries(list.map((c) => c.split(";")[0]!.split("=")).map(([k, ...v]) => [k!, v.join("=")]));
};

const form = (o: Record<string, string>): string => new URLSearchParams(o).toString();
const FORM = { "content-type": "application/x-www-form-urlencoded" };

/** Logs in with a token through the form; answers the session cookie and the page's CSRF token. */
const login = async (token: string): Promise<{ cookie: string; csrf: string }> => {
  const shown = await t.app.inject({ method: "GET", url: "/login" });
  const loginCsrf = cookies(shown).flowsvc_login!;
  const res = await t.app.inject({
    method: "POST",
    url: "/login",
    headers: { ...FORM, cookie: `flowsvc_login=${loginCsrf}` },
    payload: form({ csrf: loginCsrf, token }),
  });
  assert.equal(res.statusCode, 303, res.body);
  const set = cookies(res);
  const cookie = `flowsvc_session=${set.flowsvc_session}`;
  const home = await t.app.inject({ method: "GET", url: "/", headers: { cookie } });
  const csrf = /name="csrf" value="([^"]+)"/.exec(home.body)?.[1];
  assert.ok(csrf, home.body);
  return { cookie, csrf };
};

before(async () => {
  t = await createTestApp();
  await ask(t, "PUT", `${t.project.base}/secrets/CONSOLE_SECRET`, { as: "admin", body: { value: SECRET } });
  const res = await ask(t, "POST", `${t.project.base}/runs`, {
    body: { kind: "script", source: "echo hi\n", filename: "hi.sh", tags: ["web"] },
  });
  runId = (res.body as { id: string }).id;
  await appendLogs(
    t.db.pool,
    runId,
    null,
    Array.from({ length: 30 }, (_, i) => ({ stream: "stdout", data: `line ${i}\n` })),
  );
});
after(() => t.close());

test("login sets an httpOnly SameSite=Strict session cookie; the token is in no page; logout ends the session", async () => {
  const shown = await t.app.inject({ method: "GET", url: "/login" });
  assert.equal(shown.statusCode, 200);
  assert.match(String(shown.headers["content-security-policy"]), /script-src 'self'/);
  assert.doesNotMatch(shown.body, /<script>|style="|onclick=/i, "no inline script or style");
  const loginCsrf = cookies(shown).flowsvc_login!;
  const res = await t.app.inject({
    method: "POST",
    url: "/login",
    headers: { ...FORM, cookie: `flowsvc_login=${loginCsrf}` },
    payload: form({ csrf: loginCsrf, token: t.tokens.admin }),
  });
  assert.equal(res.statusCode, 303);
  const set = String((res.headers["set-cookie"] as string[]).find((c) => c.startsWith("flowsvc_session=")));
  assert.match(set, /HttpOnly/);
  assert.match(set, /SameSite=Strict/);
  const { rows } = await t.db.pool.query<{ n: number }>(
    `select count(*)::int as n from console_sessions where digest = sha256($1::bytea)`,
    [Buffer.from(cookies(res).flowsvc_session!)],
  );
  assert.equal(rows[0]!.n, 1, "only the session id's digest is stored");
  const s = await login(t.tokens.admin);
  for (const url of ["/", `/p/${t.project.org}/p/runs`, `/p/${t.project.org}/p/runs/${runId}`, `/p/${t.project.org}/p/secrets`]) {
    const page = await t.app.inject({ method: "GET", url, headers: { cookie: s.cookie } });
    assert.equal(page.statusCode, 200, `${url}: ${page.body}`);
    assert.ok(!page.body.includes(t.tokens.admin), `${url} carries the token`);
    assert.ok(!page.body.includes(SECRET), `${url} carries a secret value`);
  }
  const out = await t.app.inject({
    method: "POST",
    url: "/logout",
    headers: { ...FORM, cookie: s.cookie },
    payload: form({ csrf: s.csrf }),
  });
  assert.equal(out.statusCode, 303);
  const after = await t.app.inject({ method: "GET", url: "/", headers: { cookie: s.cookie } });
  assert.deepEqual([after.statusCode, after.headers.location], [303, "/login"]);
});

test("hostile logins: a forged login CSRF, a NUL or CRLF in the token, an unknown token, a 10 KB cookie", async () => {
  const shown = await t.app.inject({ method: "GET", url: "/login" });
  const c = cookies(shown).flowsvc_login!;
  const post = (csrf: string, token: string, cookie = `flowsvc_login=${c}`) =>
    t.app.inject({ method: "POST", url: "/login", headers: { ...FORM, cookie }, payload: form({ csrf, token }) });
  const forged = await post("A".repeat(43), t.tokens.admin);
  assert.equal(forged.statusCode, 403);
  assert.match(forged.body, /login form expired/);
  assert.equal((await post(c, `${t.tokens.admin}\u0000`)).statusCode, 400);
  const crlf = await post(c, `${t.tokens.admin}\r\nSet-Cookie: x=1`);
  assert.equal(crlf.statusCode, 400);
  assert.match(crlf.body, /token: only printable characters/);
  assert.ok(!cookies(crlf).x);
  const unknown = await post(c, "flw_notarealtoken");
  assert.equal(unknown.statusCode, 401);
  assert.match(unknown.body, /not valid for this server/);
  const huge = await t.app.inject({ method: "GET", url: "/", headers: { cookie: `flowsvc_session=${"x".repeat(10 * 1024)}` } });
  assert.deepEqual([huge.statusCode, huge.headers.location], [303, "/login"]);
  const { rows } = await t.db.pool.query<{ n: number }>(`select count(*)::int as n from console_sessions`);
  assert.ok(rows[0]!.n <= 2, "no refused login opened a session");
});

test("every POST needs the session's CSRF token: a forged one changes nothing", async () => {
  const s = await login(t.tokens.member);
  const before = (await ask(t, "GET", `${t.project.base}/runs/${runId}`)).body as { status: string };
  const forged = await t.app.inject({
    method: "POST",
    url: `/p/${t.project.org}/p/runs/${runId}/cancel`,
    headers: { ...FORM, cookie: s.cookie },
    payload: form({ csrf: "B".repeat(43) }),
  });
  assert.equal(forged.statusCode, 403);
  const missing = await t.app.inject({ method: "POST", url: `/p/${t.project.org}/p/runs/${runId}/cancel`, headers: { cookie: s.cookie } });
  assert.equal(missing.statusCode, 403);
  assert.equal(((await ask(t, "GET", `${t.project.base}/runs/${runId}`)).body as { status: string }).status, before.status);
});

test("the API's rules hold through the console: a viewer cannot cancel or delete a secret, and sees no manage forms", async () => {
  const s = await login(t.tokens.viewer);
  const res = await t.app.inject({
    method: "POST",
    url: `/p/${t.project.org}/p/secrets/CONSOLE_SECRET/delete`,
    headers: { ...FORM, cookie: s.cookie },
    payload: form({ csrf: s.csrf }),
  });
  assert.equal(res.statusCode, 403);
  assert.match(res.body, /needs the admin role/);
  const page = await t.app.inject({ method: "GET", url: `/p/${t.project.org}/p/secrets`, headers: { cookie: s.cookie } });
  assert.match(page.body, /CONSOLE_SECRET/);
  assert.doesNotMatch(page.body, /Replace/);
  const other = await t.app.inject({ method: "GET", url: `/p/${t.other.org}/p/runs`, headers: { cookie: s.cookie } });
  assert.equal(other.statusCode, 404);
});

test("the log comes in windows of lines through the API, and a run page filters by handler through the API", async () => {
  const s = await login(t.tokens.viewer);
  const url = `/p/${t.project.org}/p/runs/${runId}/log.json`;
  const get = (q: string) => t.app.inject({ method: "GET", url: `${url}?${q}`, headers: { cookie: s.cookie } });
  const mid = (await get("from=11&limit=3")).json<{ from: number; lines: string[]; total: number; done: boolean }>();
  assert.deepEqual([mid.from, mid.lines, mid.total, mid.done], [11, ["line 10", "line 11", "line 12"], 30, false]);
  assert.deepEqual((await get("tail=2")).json<{ lines: string[] }>().lines, ["line 28", "line 29"]);
  const bad = await get("limit=1e400");
  assert.deepEqual([bad.statusCode, bad.body.includes("limit: ")], [400, true], bad.body);
  assert.equal((await get("from=-1")).statusCode, 400);
  assert.equal((await t.app.inject({ method: "GET", url: `${url}?from=1` })).statusCode, 303, "no session: to /login");
  const byHandler = await t.app.inject({ method: "GET", url: `/p/${t.project.org}/p/runs?handler=nope`, headers: { cookie: s.cookie } });
  assert.match(byHandler.body, /0 runs/);
  const byTag = await t.app.inject({ method: "GET", url: `/p/${t.project.org}/p/runs?tag=web`, headers: { cookie: s.cookie } });
  assert.ok(byTag.body.includes(runId));
});

/** The SSE frames of a body: `[event, data, id]`; comments left out. */
const frames = (body: string): Array<{ event: string; data: unknown; id?: string }> =>
  body
    .split("\n\n")
    .filter((f) => f.includes("event: "))
    .map((f) => {
      // SSE fields end at CR or LF only (a U+2028 inside a line is text).
      const field = (name: string): string | undefined =>
        f
          .split("\n")
          .find((l) => l.startsWith(`${name}: `))
          ?.slice(name.length + 2);
      const id = field("id");
      return { event: field("event")!, data: JSON.parse(field("data")!) as unknown, ...(id === undefined ? {} : { id }) };
    });

test("the live log as Server-Sent Events: resumes after Last-Event-ID, ends with the run; refusals", async () => {
  const s = await login(t.tokens.viewer);
  const ended = await ask(t, "POST", `${t.project.base}/runs`, { body: { kind: "script", source: "echo\n", filename: "e.sh" } });
  const id = (ended.body as { id: string }).id;
  await appendLogs(t.db.pool, id, null, [
    { stream: "stdout", data: "a\r\nkey *** \u2028b\n" },
    { stream: "stdout", data: "c\nunfinished" },
  ]);
  await t.db.pool.query(`update runs set status = 'succeeded', finished_at = now() where id = $1`, [id]);
  const url = `/p/${t.project.org}/p/runs/${id}/log.events`;
  const res = await t.app.inject({ method: "GET", url, headers: { cookie: s.cookie } });
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.headers["content-type"], "text/event-stream; charset=utf-8");
  assert.deepEqual(frames(res.body), [
    { event: "lines", id: "3", data: { from: 1, lines: ["a\r", "key *** \u2028b", "c"], partial: "unfinished", total: 4 } },
    { event: "status", data: { status: "succeeded" } },
    { event: "end", data: { status: "succeeded" } },
  ]);
  const resumed = await t.app.inject({ method: "GET", url, headers: { cookie: s.cookie, "last-event-id": "2" } });
  assert.deepEqual(frames(resumed.body)[0], { event: "lines", id: "3", data: { from: 3, lines: ["c"], partial: "unfinished", total: 4 } });
  const query = await t.app.inject({ method: "GET", url: `${url}?after=4`, headers: { cookie: s.cookie } });
  assert.deepEqual(
    frames(query.body).map((f) => f.event),
    ["status", "end"],
    "nothing past the end",
  );
  for (const lastId of ["junk", "-1", "1e400", "NaN"]) {
    const r = await t.app.inject({ method: "GET", url, headers: { cookie: s.cookie, "last-event-id": lastId } });
    assert.deepEqual([r.statusCode, r.body.includes("after: ")], [400, true], `${lastId}: ${r.body}`);
  }
  assert.equal((await t.app.inject({ method: "GET", url })).statusCode, 303, "no session: to /login");
  const other = await t.app.inject({ method: "GET", url: `/p/${t.project.org}/p/runs/run-nope/log.events`, headers: { cookie: s.cookie } });
  assert.equal(other.statusCode, 404);
});

test("the live stream sends lines as they are written and ends when the run does", async () => {
  const s = await login(t.tokens.viewer);
  const res0 = await ask(t, "POST", `${t.project.base}/runs`, { body: { kind: "script", source: "echo\n", filename: "l.sh" } });
  const id = (res0.body as { id: string }).id;
  const address = await t.app.listen({ host: "127.0.0.1", port: 0 });
  const res = await fetch(`${address}/p/${t.project.org}/p/runs/${id}/log.events`, { headers: { cookie: s.cookie } });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let body = "";
  const until = async (pattern: RegExp): Promise<void> => {
    while (!pattern.test(body)) {
      const { value, done } = await reader.read();
      if (done) assert.fail(`the stream ended before ${pattern}: ${body}`);
      body += value;
    }
  };
  await until(/event: status\ndata: \{"status":"queued"\}/);
  await appendLogs(t.db.pool, id, null, [{ stream: "stdout", data: "first\n" }]);
  await until(/"lines":\["first"\]/);
  await appendLogs(t.db.pool, id, null, [{ stream: "stdout", data: "second\n" }]);
  // As the run's end nudges its followers (flowsvc_runs); without it, the follower's poll finds it.
  await t.db.pool.query(`update runs set status = 'failed', finished_at = now() where id = $1`, [id]);
  await t.db.pool.query(`select pg_notify('flowsvc_runs', $1)`, [id]);
  await until(/event: end/);
  assert.deepEqual(
    frames(body).map((f) => [f.event, f.id]),
    [
      ["status", undefined],
      ["lines", "1"],
      ["lines", "2"],
      ["status", undefined],
      ["end", undefined],
    ],
  );
  assert.equal((await reader.read()).done, true, "the stream closes after end");
});

test("the stream's heartbeat: a comment while the session lives; the stream closes once the session has ended", async () => {
  const listener = startListener(t.db.url, () => {});
  let allowed = true;
  const out = streamLogEvents(
    { pool: t.db.pool, listener, logLines: new LogLineIndexes(t.db.pool) },
    { runId, after: 30, client: new EventEmitter() as IncomingMessage, allowed: () => Promise.resolve(allowed), heartbeatMs: 20 },
  );
  let body = "";
  let closed = false;
  out.setEncoding("utf8");
  out.on("data", (c: string) => (body += c));
  out.on("close", () => (closed = true));
  try {
    await waitFor("the status and a heartbeat", () => body.includes("event: status") && body.includes(": ping\n\n"), 5_000, 10);
    allowed = false;
    await waitFor("the stream to close", () => closed, 5_000, 10);
    assert.deepEqual(
      frames(body).map((f) => f.event),
      ["status"],
      "no line past line 30, no end: the run goes on",
    );
  } finally {
    await listener.close();
  }
});

test("markdown is rendered with every tag escaped and only http(s) links", () => {
  const out = md(
    '# Title\n\n**bold** <script>alert(1)</script> [x](javascript:alert(1)) [ok](https://e.com/a?b=1&c=2) `<b>`\n\n- one\n- "two"',
  ).html;
  assert.match(out, /<h3>Title<\/h3>/);
  assert.match(out, /<strong>bold<\/strong>/);
  assert.ok(!out.includes("<script>"));
  assert.ok(!/href="javascript/.test(out));
  assert.match(out, /<a href="https:\/\/e.com\/a\?b=1&amp;c=2"/);
  assert.match(out, /<code>&lt;b&gt;<\/code>/);
  assert.match(out, /<li>&quot;two&quot;<\/li>/);
});

const GATE_FIELDS: ApprovalField[] = [
  { name: "env", type: "select", required: true, options: ["staging", "prod"] },
  { name: "note", type: "textarea", label: "Why" },
  { name: "ticket", type: "text", required: true },
];

/** A graph run parked on its approval node `deploy`, as the engine leaves it (see routes/approvals.test.ts). */
const parkedGraphRun = (): Promise<string> =>
  withTransaction(t.db.pool, async (tx) => {
    const nodes = [{ id: "deploy", type: "approval", config: { prompt: "Ship <it>?", fields: GATE_FIELDS } }];
    const { id } = await createRun(tx, {
      projectId: t.project.projectId,
      source: JSON.stringify({ version: GRAPH_WORKFLOW, nodes, edges: [] }),
      filename: "gate.json",
      trusted: true,
      workflow: GRAPH_WORKFLOW,
    });
    await insertGraphNodes(tx, id, { nodes, input: {} });
    const substate = { name: "deploy", kind: "approval", prompt: "Ship <it>?", fields: GATE_FIELDS };
    await updateGraphNode(tx, id, "deploy", { status: "parked", attempt: 1, mode: "wait", substate, started_at: "now" });
    await tx.query(`update runs set status = 'parked' where id = $1`, [id]);
    return id;
  });

test("a viewer's run page shows the run and its gate but no form that changes them (the API would refuse it)", async () => {
  const id = await parkedGraphRun();
  const runUrl = `/p/${t.project.org}/p/runs/${id}`;
  const v = await login(t.tokens.viewer);
  const viewed = await t.app.inject({ method: "GET", url: runUrl, headers: { cookie: v.cookie } });
  assert.equal(viewed.statusCode, 200, viewed.body);
  assert.match(viewed.body, /Ship &lt;it&gt;\?<\/strong> <span class="role">gate deploy<\/span>: waits for a member's answer/);
  assert.match(
    viewed.body,
    /id="read-only">You are a viewer of this project: cancelling, rerunning and answering a gate need the member role/,
  );
  assert.doesNotMatch(viewed.body, /action="[^"]+\/(approvals\/deploy|cancel|rerun)"|id="cancel"|name="decision"/);
});

test("approval gates: typed fields from the gate's schema; a missing required field inline, not released; an answer records the approver", async () => {
  const id = await parkedGraphRun();
  const s = await login(t.tokens.member);
  const runUrl = `/p/${t.project.org}/p/runs/${id}`;
  const shown = await t.app.inject({ method: "GET", url: runUrl, headers: { cookie: s.cookie } });
  assert.equal(shown.statusCode, 200, shown.body);
  assert.match(shown.body, /<form method="post" action="[^"]+\/approvals\/deploy" class="gate" aria-label="gate deploy" novalidate>/);
  assert.match(shown.body, /Ship &lt;it&gt;\?/);
  assert.match(
    shown.body,
    /<select id="g-deploy-env" name="field.env" aria-required="true"><option value="">choose…<\/option><option>staging<\/option><option>prod<\/option><\/select>/,
  );
  assert.match(
    shown.body,
    /<label for="g-deploy-note">Why<\/label><br><textarea id="g-deploy-note" name="field.note" rows="4"><\/textarea>/,
  );
  assert.match(
    shown.body,
    /<label for="g-deploy-ticket">ticket \(required\)<\/label><br><input id="g-deploy-ticket" name="field.ticket" aria-required="true" value="">/,
  );
  assert.match(shown.body, /id="cancel"/);
  const answer = (fields: Record<string, string>) =>
    t.app.inject({
      method: "POST",
      url: `${runUrl}/approvals/deploy`,
      headers: { ...FORM, cookie: s.cookie },
      payload: form({ csrf: s.csrf, decision: "approve", ...fields }),
    });
  const signals = async () =>
    (await t.db.pool.query<{ payload: unknown; sent_by: string }>(`select payload, sent_by from signals where run_id = $1`, [id])).rows;
  // Missing the select and the ticket (and what was typed kept, escaped): both named inline, nothing delivered.
  const missing = await answer({ "field.env": "", "field.note": "<b>x</b>", "field.ticket": "" });
  assert.equal(missing.statusCode, 400, missing.body);
  assert.match(missing.body, /aria-invalid="true" aria-describedby="g-deploy-env-err"/);
  assert.match(missing.body, /<span class="error" id="g-deploy-env-err">approval field &quot;env&quot; is required<\/span>/);
  assert.match(missing.body, /<span class="error" id="g-deploy-ticket-err">approval field &quot;ticket&quot; is required<\/span>/);
  assert.match(missing.body, /<textarea id="g-deploy-note" name="field.note" rows="4">&lt;b&gt;x&lt;\/b&gt;<\/textarea>/);
  assert.match(missing.body, /role="alert" id="g-deploy-error">not answered: see the fields below/);
  // A value outside the select's options, and a field the gate does not declare, are the route's refusals too.
  const nul = await answer({ "field.env": "prod\u0000", "field.ticket": "T-1" });
  assert.equal(nul.statusCode, 400, nul.body);
  assert.match(nul.body, /not answered: body.fields.env holds a NUL character/);
  assert.match(nul.body, /<input id="g-deploy-ticket" name="field.ticket" aria-required="true" value="T-1">/, "what was typed is kept");
  // A field the gate does not declare is refused by the route; `__proto__` reaches it as an own key and is refused too.
  const undeclared = await answer({ "field.env": "prod", "field.ticket": "T-1", "field.extra": "x" });
  assert.equal(undeclared.statusCode, 400, undeclared.body);
  assert.match(undeclared.body, /not answered: approval field &quot;extra&quot; is not declared by this gate/);
  const proto = await answer({ "field.env": "prod", "field.ticket": "T-1", "field.__proto__": "x" });
  assert.equal(proto.statusCode, 400, proto.body);
  assert.match(proto.body, /role="alert" id="g-deploy-error">not answered: /);
  assert.deepEqual(await signals(), [], "a refused answer releases nothing");
  const ok = await answer({ "field.env": "prod", "field.note": "", "field.ticket": "T-1" });
  assert.equal(ok.statusCode, 303, ok.body);
  assert.equal(ok.headers.location, runUrl);
  const fields = { env: "prod", note: "", ticket: "T-1" };
  assert.deepEqual(await signals(), [{ payload: { decision: "approve", ...fields, approved_by: "mo" }, sent_by: "mo" }]);
  // The engine resumes the gate with the signal's payload as its output: the run page shows the approver.
  await withTransaction(t.db.pool, (tx) =>
    updateGraphNode(tx, id, "deploy", {
      status: "success",
      output: { decision: "approve", ...fields, approved_by: "mo" },
      finished_at: "now",
    }),
  );
  await t.db.pool.query(`update runs set status = 'succeeded' where id = $1`, [id]);
  const after = await t.app.inject({ method: "GET", url: runUrl, headers: { cookie: s.cookie } });
  assert.match(
    after.body,
    /<tr data-node="deploy"><td>deploy<\/td><td>approval<\/td><td><span class="status status-success">success<\/span> <span class="approver">approved by mo<\/span>/,
  );
  assert.ok(!after.body.includes('class="gate"'), "no form once the gate is answered");
  assert.deepEqual(answerOf({ csrf: "x", decision: "approve", "field.env": "prod", "field.note": "" }), {
    decision: "approve",
    fields: { env: "prod" },
  });
});

test("connections: the page lists through the accounts route; a connect with no provider configured shows the route's refusal", async () => {
  const s = await login(t.tokens.member);
  assert.equal(accountsAvailable(t.app), true);
  const shown = await t.app.inject({ method: "GET", url: `/p/${t.project.org}/p/connections`, headers: { cookie: s.cookie } });
  assert.equal(shown.statusCode, 200);
  assert.match(shown.body, /Connected accounts: none/);
  const connect = await t.app.inject({
    method: "POST",
    url: `/p/${t.project.org}/p/connections/connect`,
    headers: { ...FORM, cookie: s.cookie },
    payload: form({ csrf: s.csrf, name: "GH", provider: "github" }),
  });
  assert.equal(connect.statusCode, 400);
  assert.match(connect.body, /the operator configured no provider/);
  const html = connectionsPage({ org: "o", project: "p", csrf: "c" }, [
    { name: "GH", provider: "github", far_label: "<octo>", status: "in_doubt", granter: "mo", connected_at: "2026-11-26T10:00:00Z" },
  ]).html;
  assert.match(html, /&lt;octo&gt;/);
  assert.match(html, /status-in_doubt">in_doubt</);
  assert.match(html, /action="\/p\/o\/p\/connections\/GH\/remove"/);
  assert.match(html, /action="\/p\/o\/p\/connections\/GH\/disable"/);
  assert.match(html, /<button type="submit">Reconnect<\/button>/);
  const off = connectionsPage({ org: "o", project: "p", csrf: "c" }, [{ name: "GH", provider: "github", status: "disabled" }]).html;
  assert.doesNotMatch(off, /\/disable"/, "a disabled account offers Reconnect, not Disable");
});

test("connections: a viewer sees the accounts but is offered no Connect, Reconnect, Disable or Remove (the accounts route would refuse each)", async () => {
  await connectTestAccount(t, { name: "web-seen", status: "active" });
  const v = await login(t.tokens.viewer);
  const shown = await t.app.inject({ method: "GET", url: `/p/${t.project.org}/p/connections`, headers: { cookie: v.cookie } });
  assert.equal(shown.statusCode, 200, shown.body);
  assert.match(shown.body, /web-seen/);
  assert.match(
    shown.body,
    /id="read-only">You are a viewer of this project: connecting, reconnecting, disabling and removing an account need/,
  );
  assert.doesNotMatch(shown.body, /action="[^"]+\/connections\/(connect|web-seen\/disable|web-seen\/remove)"/);
  const m = await login(t.tokens.member);
  const member = await t.app.inject({ method: "GET", url: `/p/${t.project.org}/p/connections`, headers: { cookie: m.cookie } });
  assert.match(member.body, /action="[^"]+\/connections\/connect"/);
});

test("connections: Disable switches an account off through the accounts route (CSRF, the granter or an admin); others are refused", async () => {
  await connectTestAccount(t, { name: "web-off", status: "active" });
  const statusOf = async () =>
    ((await ask(t, "GET", `${t.project.base}/accounts`, { as: "viewer" })).body as Array<{ name: string; status: string }>).find(
      (a) => a.name === "web-off",
    )?.status;
  const post = (s: { cookie: string }, csrf: string) =>
    t.app.inject({
      method: "POST",
      url: `/p/${t.project.org}/p/connections/web-off/disable`,
      headers: { ...FORM, cookie: s.cookie },
      payload: form({ csrf }),
    });
  const admin = await login(t.tokens.admin);
  assert.equal((await post(admin, "B".repeat(43))).statusCode, 403, "a forged CSRF token");
  const member = await login(t.tokens.member);
  const refused = await post(member, member.csrf);
  assert.equal(refused.statusCode, 403);
  assert.match(refused.body, /disabling connected account web-off needs the admin role or to be its granter/);
  assert.equal(await statusOf(), "active");
  const done = await post(admin, admin.csrf);
  assert.equal(done.statusCode, 303, done.body);
  assert.equal(done.headers.location, `/p/${t.project.org}/p/connections`);
  assert.equal(await statusOf(), "disabled");
});

test("after a connect: a console-started callback answers 303 to the Connections page with a one-time flash; API callers keep JSON", async () => {
  const s = await login(t.tokens.member);
  const returnCookie = (v: unknown): string => `flowsvc_oauth_return=${Buffer.from(JSON.stringify(v)).toString("base64url")}`;
  // An API caller (no return cookie) gets the route's JSON refusal, as before.
  const api = await t.app.inject({ method: "GET", url: "/oauth/callback?state=bogus&code=c" });
  assert.equal(api.statusCode, 400, api.body);
  assert.match(api.json<{ error: { message: string } }>().error.message, /not valid/);
  // From the console: back to the project's Connections page, the refusal in the flash cookie, the return cookie cleared.
  const back = await t.app.inject({
    method: "GET",
    url: "/oauth/callback?state=bogus&code=c",
    headers: { cookie: returnCookie([t.project.org, "p"]) },
  });
  assert.equal(back.statusCode, 303, back.body);
  assert.equal(back.headers.location, `/p/${t.project.org}/p/connections`);
  const set = cookies(back);
  assert.equal(set.flowsvc_oauth_return, "");
  const flash = set.flowsvc_flash!;
  assert.match(String(back.headers["set-cookie"]), /flowsvc_flash=[^;]+; Path=\/p\/; Max-Age=120; HttpOnly; SameSite=Lax/);
  const shown = await t.app.inject({
    method: "GET",
    url: back.headers.location,
    headers: { cookie: `${s.cookie}; flowsvc_flash=${flash}` },
  });
  assert.equal(shown.statusCode, 200);
  assert.match(shown.body, /<p class="error" role="alert" id="flash">connecting was refused: [^<]*not valid/);
  assert.match(String(shown.headers["set-cookie"]), /flowsvc_flash=; Path=\/p\/; Max-Age=0/, "shown once");
  // The location is built from the two names, encoded: a hostile cookie cannot send the browser elsewhere.
  const odd = await t.app.inject({
    method: "GET",
    url: "/oauth/callback?state=bogus",
    headers: { cookie: returnCookie(["//evil.example", "a/../b"]) },
  });
  assert.equal(odd.headers.location, "/p/%2F%2Fevil.example/a%2F..%2Fb/connections");
  for (const bad of [returnCookie(["o\u0000", "p"]), returnCookie(["o"]), returnCookie({ org: "o" }), "flowsvc_oauth_return=%%%"]) {
    const json = await t.app.inject({ method: "GET", url: "/oauth/callback?state=bogus", headers: { cookie: bad } });
    assert.equal(json.statusCode, 400, `${bad}: ${json.body}`);
  }
  // A made-up flash is shown escaped, never as markup.
  const forged = Buffer.from(JSON.stringify({ ok: true, text: "<img src=x onerror=alert(1)>" })).toString("base64url");
  const esc = await t.app.inject({
    method: "GET",
    url: back.headers.location,
    headers: { cookie: `${s.cookie}; flowsvc_flash=${forged}` },
  });
  assert.match(esc.body, /role="status" id="flash">&lt;img src=x onerror=alert\(1\)&gt;</);
  // A flash cookie that is repeated, over its 4096 characters, or not base64url shows nothing (the one cookie reader's rule).
  const huge = Buffer.from(JSON.stringify({ ok: true, text: "x".repeat(4000) })).toString("base64url");
  const withCookie = (cookie: string) =>
    t.app.inject({ method: "GET", url: `/p/${t.project.org}/p/connections`, headers: { cookie: `${s.cookie}; ${cookie}` } });
  for (const bad of [`flowsvc_flash=${forged}; flowsvc_flash=${forged}`, `flowsvc_flash=${huge}`, `flowsvc_flash=${forged}%00`]) {
    const none = await withCookie(bad);
    assert.equal(none.statusCode, 200, none.body);
    assert.ok(!none.body.includes('id="flash"'), `${bad.slice(0, 60)}: a flash was shown`);
  }
});

test("a page reached from another site without the Strict session cookie loads itself again from here; else /login", async () => {
  const url = `/p/${t.project.org}/p/connections`;
  const cross = await t.app.inject({ method: "GET", url, headers: { "sec-fetch-site": "cross-site" } });
  assert.equal(cross.statusCode, 200);
  assert.match(cross.body, /<meta http-equiv="refresh" content="0"><p><a href="\/p\/[^"]+\/p\/connections">Continue<\/a>/);
  const same = await t.app.inject({ method: "GET", url, headers: { "sec-fetch-site": "same-origin" } });
  assert.equal(same.statusCode, 303);
  assert.equal(same.headers.location, "/login");
});
