/**
 * People and their tokens over app.inject(): an admin adds a user with a role and a first token
 * (routes/users.ts), the new token works at once and only its digest is stored; a viewer or member
 * may not add; a name that exists is a conflict with nothing written; hostile names and bodies are
 * refused. Then a user's own tokens (routes/tokens.ts): create (shown once), list (never the token
 * or its digest), revoke (the next request with it is 401), another user's token is not_found, the
 * token making the request only with force, and a job token is refused on every token route.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { digestToken } from "@flowsvc/store";
import { ask, assertCallerRefusals, assertError, countRows, dispatchJob, type TestApp, createTestApp } from "../testing/test-app.js";

let t: TestApp;
let users: string;
/** ann's run: its job's token is the job token the token routes refuse. */
let annRun: string;
before(async () => {
  t = await createTestApp();
  users = `${t.project.base}/users`;
});
after(() => t.close());

const add = (body: unknown, as: "admin" | "member" | "viewer" = "admin") => ask(t, "POST", users, { as, body });
const rowCounts = async (): Promise<number[]> => [
  await countRows(t, "users"),
  await countRows(t, "memberships"),
  await countRows(t, "api_tokens"),
];

test("an admin adds a user: user, membership and first token in one go; the token works at once and only its digest is kept", async () => {
  await assertCallerRefusals(t, { method: "POST", url: users, body: { name: "zed", role: "viewer" } }, "admin");
  assertError(await add({ name: "zed", role: "viewer" }, "viewer"), 403, /this needs the admin role on .*; vera is viewer/);
  const res = await add({ name: "ann", role: "member" });
  assert.equal(res.status, 201, res.text);
  const body = res.body as { user: string; role: string; token: string; token_id: string };
  assert.deepEqual([body.user, body.role], ["ann", "member"]);
  assert.match(body.token, /^flw_[A-Za-z0-9_-]{43}$/);
  assert.match(body.token_id, /^tok-[0-9a-z]{26}$/);

  const { rows } = await t.db.pool.query<{ digest: Buffer; label: string }>(
    `select k.digest, k.label from api_tokens k join users u on u.id = k.user_id where u.name = 'ann'`,
  );
  assert.equal(rows.length, 1);
  assert.deepEqual(rows[0]!.digest, digestToken(body.token), "the digest is stored");
  assert.equal(rows[0]!.label, "created by ada for ann");
  const dump = JSON.stringify((await t.db.pool.query(`select * from api_tokens`)).rows);
  assert.ok(!dump.includes(body.token.slice(4)), "the token itself is in no row");

  const who = await ask(t, "GET", "/api/v1/whoami", { as: { token: body.token } });
  assert.deepEqual(who.body, { user: "ann", projects: [{ org: t.project.org, project: "p", role: "member" }] });
  const run = await ask(t, "POST", `${t.project.base}/runs`, {
    as: { token: body.token },
    body: { kind: "script", source: "true\n", filename: "job.sh" },
  });
  assert.equal(run.status, 201, run.text);
  annRun = (run.body as { id: string }).id;
  assertError(
    await ask(t, "POST", users, { as: { token: body.token }, body: { name: "bob", role: "viewer" } }),
    403,
    /this needs the admin role on .*; ann is member/,
  );
});

test("a name that exists (here or on another project) is a conflict and nothing is written; member set is how they join", async () => {
  const before = await rowCounts();
  const taken = await add({ name: "olga", role: "admin" });
  assertError(taken, 409, /a user named "olga" exists on this server/);
  assert.match(taken.error?.hint ?? "", /flow member set olga --role admin/);
  assertError(await add({ name: "ann", role: "viewer" }), 409, /"ann" exists/);
  assert.deepEqual(await rowCounts(), before);
  assert.doesNotMatch(taken.text, /flw_/);
});

test("hostile names and bodies are refused with the field named, and nothing is written", async () => {
  const before = await rowCounts();
  const cases: Array<[unknown, RegExp]> = [
    [{ name: "a\u0000b", role: "viewer" }, /body.name holds a NUL character/],
    ['{"name": "a\\ud800", "role": "viewer"}', /body.name holds a lone UTF-16 surrogate/],
    [{ name: "x".repeat(10_000), role: "viewer" }, /a user name is at most 100 characters; this one has 10000/],
    [{ name: "../x", role: "viewer" }, /user name "..\/x" is not allowed/],
    [{ name: "admin%2F", role: "viewer" }, /user name "admin%2F" is not allowed/],
    [{ name: "", role: "viewer" }, /a user name is empty/],
    [{ name: "zed", role: "owner" }, /role: must be one of viewer, member, admin/],
    [{ name: "zed" }, /role/],
    ['{"name": 1e400, "role": "viewer"}', /name/],
    [{ name: "zed", role: "viewer", label: "x" }, /label/],
    ["[[[[", /./],
  ];
  for (const [body, message] of cases) assertError(await add(body), 400, message, JSON.stringify(body).slice(0, 40));
  assert.deepEqual(await rowCounts(), before);
});

const tokens = "/api/v1/tokens";
interface Listed {
  id: string;
  label: string;
  created_at: string;
  last_used_at: string | null;
  current: boolean;
}

test("a user makes, lists and revokes their own tokens; the revoked one is 401 on the next request", async () => {
  const made = await ask(t, "POST", tokens, { as: "viewer", body: { label: "ci on laptop" } });
  assert.equal(made.status, 201, made.text);
  const second = made.body as { id: string; label: string; token: string };
  assert.equal(second.label, "ci on laptop");
  const plain = await ask(t, "POST", tokens, { as: { token: second.token } });
  assert.equal(plain.status, 201, plain.text);
  const third = plain.body as { id: string; label: string; token: string };
  assert.equal(third.label, "created by vera", "no body: the default label");

  const listed = await ask(t, "GET", tokens, { as: { token: second.token } });
  assert.equal(listed.status, 200, listed.text);
  const rows = listed.body as Listed[];
  assert.deepEqual(
    rows.map((r) => [r.label, r.current]),
    [
      ["vera", false],
      ["ci on laptop", true],
      ["created by vera", false],
    ],
  );
  assert.deepEqual(Object.keys(rows[0]!).sort(), ["created_at", "current", "id", "label", "last_used_at"]);
  assert.doesNotMatch(listed.text, /flw_/);
  assert.ok(rows[1]!.last_used_at, "a used token has last_used_at");

  const gone = await ask(t, "DELETE", `${tokens}/${third.id}`, { as: { token: second.token } });
  assert.deepEqual([gone.status, gone.body], [200, { id: third.id, revoked: true }]);
  assertError(await ask(t, "GET", tokens, { as: { token: third.token } }), 401, /the API token is not valid for this server/);
  assertError(await ask(t, "GET", `${t.project.base}/runs`, { as: { token: third.token } }), 401, /not valid/);
  assertError(await ask(t, "DELETE", `${tokens}/${third.id}`, { as: { token: second.token } }), 404, /you have no token tok-/);

  const self = await ask(t, "DELETE", `${tokens}/${second.id}`, { as: { token: second.token } });
  assertError(self, 409, /is the token making this request: removing it logs you out/);
  assert.match(self.error?.hint ?? "", /--force/);
  const forced = await ask(t, "DELETE", `${tokens}/${second.id}?force=true`, { as: { token: second.token } });
  assert.equal(forced.status, 200, forced.text);
  assertError(await ask(t, "GET", tokens, { as: { token: second.token } }), 401, /not valid/);
  assert.equal((await ask(t, "GET", tokens, { as: "viewer" })).status, 200, "vera's first token still works");
});

test("another user's token id is not_found (and stays), a job token is refused, hostile labels and ids are refused", async () => {
  const adas = (await ask(t, "GET", tokens, { as: "admin" })).body as Listed[];
  const theirs = await ask(t, "DELETE", `${tokens}/${adas[0]!.id}?force=true`, { as: "member" });
  assertError(theirs, 404, new RegExp(`you have no token ${adas[0]!.id}`));
  assert.equal((await ask(t, "GET", tokens, { as: "admin" })).status, 200, "ada's token still works");

  const job = await dispatchJob(t, annRun);
  for (const [method, url] of [
    ["GET", tokens],
    ["POST", tokens],
    ["DELETE", `${tokens}/${adas[0]!.id}`],
  ] as const)
    assertError(await ask(t, method, url, { as: { token: job.token } }), 401, /not valid for this server/, `${method} with a job token`);
  assertError(await ask(t, "GET", tokens, { as: "none" }), 401, /no API token was sent/);

  const before = await countRows(t, "api_tokens");
  const labels: Array<[string, RegExp]> = [
    ['{"label": ""}', /a token label is empty/],
    ['{"label": "a\\nb"}', /control character/],
    ['{"label": "a\\u0000b"}', /body.label holds a NUL character/],
    ['{"label": "a\\u001bb"}', /control character/],
    ['{"label": "a\\ud800"}', /body.label holds a lone UTF-16 surrogate/],
    [JSON.stringify({ label: "x".repeat(10_000) }), /at most 100 characters; this one has 10000/],
    ['{"label": 1e400}', /label/],
    ['{"label": "ok", "user": "ada"}', /user/],
    ["[[[[", /./],
  ];
  for (const [body, message] of labels) assertError(await ask(t, "POST", tokens, { as: "member", body }), 400, message, body.slice(0, 30));
  const ids: Array<[string, number, RegExp]> = [
    ["tok-x%00", 400, /path parameter id holds a NUL character/],
    ["tok-xyz", 400, /"tok-xyz" is no token id/],
    ["%ED%A0%80", 400, /./],
    ["..%2Ftok", 400, /is no token id/],
    ["x".repeat(10_000), 414, /./],
  ];
  for (const [id, status, message] of ids)
    assertError(await ask(t, "DELETE", `${tokens}/${id}`, { as: "member" }), status, message, id.slice(0, 20));
  assertError(await ask(t, "DELETE", `${tokens}/${adas[0]!.id}?force=yes`, { as: "admin" }), 400, /force/);
  assert.equal(await countRows(t, "api_tokens"), before);
});
