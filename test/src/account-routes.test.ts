/**
 * The connected-account routes (ingest/src/routes/accounts.ts) over app.inject(), with the OAuth
 * provider peer on 127.0.0.1 playing the far side and this test playing the browser: connect, the
 * consent redirect, the callback; a replayed, expired or foreign state; a reconnect that lands on a
 * different far-side account; a failing identity lookup; list and remove (with revocation); disable
 * by hand and reconnect.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { parseAccountProviders } from "@flowsvc/core";
import {
  ask,
  assertCallerRefusals,
  assertError,
  countRows,
  createTestApp,
  dispatchJob,
  type Answer,
  type TestApp,
} from "@flowsvc/ingest/testing";
import { OAuthProviderPeer } from "./peers/oauth-provider.js";

const REDIRECT = "http://127.0.0.1:1/oauth/callback";
let t: TestApp;
let peer: OAuthProviderPeer;
let accounts: string;

before(async () => {
  peer = await new OAuthProviderPeer({ rotatesRefreshToken: true, reuseRevokesFamily: true, expiresIn: 3600 }).start();
  const config = parseAccountProviders(
    JSON.stringify([
      peer.providerConfig("gh"),
      peer.providerConfig("broken", { identity: { url: `${peer.url}/user`, id_pointer: "/nope", label_pointer: "/login" } }),
    ]),
    REDIRECT,
  );
  t = await createTestApp({ accounts: config });
  accounts = `${t.project.base}/accounts`;
});
after(async () => {
  await t?.close();
  await peer?.close();
});

interface Started {
  cookie: string;
  /** The callback's path and query, as the provider redirected the browser to it. */
  callback: string;
  authorizeUrl: URL;
}

/** POST connect, then the browser at the provider: answers where the provider sent it back. */
const startConnect = async (name: string, provider = "gh", as: "member" | "admin" = "member"): Promise<Started> => {
  const res = await ask(t, "POST", `${accounts}/connect`, { as, body: { name, provider } });
  assert.equal(res.status, 200, res.text);
  const setCookie = String(res.res.headers["set-cookie"]);
  assert.match(setCookie, /^flowsvc_oauth_session=[A-Za-z0-9_-]{43}; Path=\/oauth\/callback; Max-Age=600; HttpOnly; SameSite=Lax$/);
  const authorizeUrl = new URL((res.body as { authorize_url: string }).authorize_url);
  const consent = await fetch(authorizeUrl, { redirect: "manual" });
  const back = new URL(consent.headers.get("location")!);
  assert.equal(`${back.origin}${back.pathname}`, REDIRECT);
  return { cookie: setCookie.split(";")[0]!, callback: `${back.pathname}${back.search}`, authorizeUrl };
};

const callback = (s: Pick<Started, "callback">, cookie: string): Promise<Answer> =>
  ask(t, "GET", s.callback, { as: "none", headers: { cookie } });

const listed = async () => (await ask(t, "GET", accounts, { as: "viewer" })).body as Array<Record<string, unknown>>;

void test("connecting: PKCE S256 and a state in the authorize URL, the callback stores the account; list shows no token", async () => {
  peer.user = { id: 1001, login: "ann" };
  const s = await startConnect("github");
  const q = s.authorizeUrl.searchParams;
  assert.deepEqual(
    [q.get("response_type"), q.get("code_challenge_method"), q.get("redirect_uri"), q.get("scope")],
    ["code", "S256", REDIRECT, "repo read:user"],
  );
  assert.match(q.get("state") ?? "", /^[A-Za-z0-9_-]{43}$/);
  const done = await callback(s, s.cookie);
  assert.equal(done.status, 200, done.text);
  assert.deepEqual(done.body, { name: "github", provider: "gh", far_label: "ann", status: "active" });
  const [a] = await listed();
  assert.deepEqual(
    [a?.["name"], a?.["provider"], a?.["far_label"], a?.["status"], a?.["granter"]],
    ["github", "gh", "ann", "active", "mo"],
  );
  const all = JSON.stringify(await listed()) + done.text;
  assert.doesNotMatch(all, /at_|rt_/, "no token in any answer");
  // Replaying the same callback (state already used) is refused and changes nothing.
  assertError(await callback(s, s.cookie), 400, /not valid \(unknown, already used, expired, or from another browser session\)/);
});

void test("a state from another browser session, an expired one, or a forged one is refused; nothing is stored", async () => {
  const foreign = await startConnect("foreign");
  assertError(await callback(foreign, "flowsvc_oauth_session=someone-elses-session-id-000000000000000"), 400, /another browser session/);
  assertError(await callback(foreign, foreign.cookie), 400, /already used/, "the attacker's attempt burned the state");
  const late = await startConnect("late");
  await t.db.pool.query(`update oauth_states set expires_at = now() - interval '1 second'`);
  assertError(await callback(late, late.cookie), 400, /expired/);
  assertError(await callback({ callback: "/oauth/callback?state=forged&code=x" }, late.cookie), 400, /not valid/);
  assertError(await callback({ callback: "/oauth/callback?code=x" }, late.cookie), 400, /state: is required/);
  // Present but wrong is not "required": too long, given twice; and a connect's name sent as a number.
  assertError(
    await callback({ callback: `/oauth/callback?state=${"s".repeat(513)}&code=x` }, late.cookie),
    400,
    /^state: Too big: expected string to have <=512 characters$/,
  );
  assertError(
    await callback({ callback: "/oauth/callback?state=a&state=b&code=x" }, late.cookie),
    400,
    /^state: Invalid input: expected string, received array$/,
  );
  assertError(
    await ask(t, "POST", `${accounts}/connect`, { body: { name: 5, provider: "gh" } }),
    400,
    /^name: Invalid input: expected string, received number$/,
  );
  assert.equal(await countRows(t, "accounts where name in ('foreign', 'late')"), 0);
});

void test("reconnecting under a name must land on the same far-side account; another is refused and its new grant revoked", async () => {
  peer.user = { id: 2002, login: "bob" };
  const first = await startConnect("deploy");
  assert.equal((await callback(first, first.cookie)).status, 200);
  await t.db.pool.query(`update accounts set status = 'needs_reauth' where name = 'deploy'`);
  peer.user = { id: 6666, login: "mallory" };
  const other = await startConnect("deploy");
  const revokedBefore = peer.revokedTokens.length;
  assertError(
    await callback(other, other.cookie),
    409,
    /reconnecting "deploy" landed on a different account \(gh "mallory"\) than the one connected \(gh "bob"\): refused/,
  );
  assert.equal(peer.revokedTokens.length, revokedBefore + 1, "the unwanted grant is revoked at the provider");
  const deploy = (await listed()).find((a) => a["name"] === "deploy");
  assert.deepEqual([deploy?.["far_label"], deploy?.["status"]], ["bob", "needs_reauth"]);
  peer.user = { id: 2002, login: "bob-renamed" };
  const same = await startConnect("deploy");
  assert.equal((await callback(same, same.cookie)).status, 200);
  const back = (await listed()).find((a) => a["name"] === "deploy");
  assert.deepEqual([back?.["far_label"], back?.["status"]], ["bob-renamed", "active"]);
});

void test("a failing identity lookup never stores or replaces an account", async () => {
  peer.user = { id: 2002, login: "bob" };
  peer.identityFaults.push(500);
  const s = await startConnect("deploy");
  assertError(await callback(s, s.cookie), 409, /provider gh: the identity lookup failed \(HTTP 500\)/);
  const noId = await startConnect("nobody", "broken");
  assertError(await callback(noId, noId.cookie), 409, /the identity response has no id at \/nope/);
  assert.equal(await countRows(t, "accounts where name = 'nobody'"), 0);
  assert.equal((await listed()).find((a) => a["name"] === "deploy")?.["status"], "active");
});

void test("connect refuses bad input, an unknown provider, a viewer; a name held by a credential is refused", async () => {
  await assertCallerRefusals(t, { method: "POST", url: `${accounts}/connect`, body: { name: "x", provider: "gh" } }, "member");
  assertError(
    await ask(t, "POST", `${accounts}/connect`, { body: { name: "x", provider: "gitlab" } }),
    400,
    /no provider named "gitlab" is configured \(configured: gh, broken\)/,
  );
  assertError(await ask(t, "POST", `${accounts}/connect`, { body: { name: "x" } }), 400, /provider: is required/);
  assertError(await ask(t, "POST", `${accounts}/connect`, { body: { name: "a b", provider: "gh" } }), 400, /name/);
  assertError(await ask(t, "POST", `${accounts}/connect`, { body: { name: "x", provider: "gh", extra: 1 } }), 400, /extra/);
  assert.equal(
    (await ask(t, "PUT", `${t.project.base}/credentials/taken`, { as: "admin", body: { kind: "bearer", token: "t" } })).status,
    200,
  );
  assertError(
    await ask(t, "POST", `${accounts}/connect`, { body: { name: "taken", provider: "gh" } }),
    409,
    /already taken by a credential/,
  );
  // A credential set while the browser was at the provider is refused at the callback.
  const s = await startConnect("late-taken");
  assert.equal(
    (await ask(t, "PUT", `${t.project.base}/credentials/late-taken`, { as: "admin", body: { kind: "bearer", token: "t" } })).status,
    200,
  );
  assertError(await callback(s, s.cookie), 409, /already taken by a credential/);
});

void test("removing: the granter or an admin forgets the account and it is revoked at the provider; others are refused", async () => {
  peer.user = { id: 3003, login: "cy" };
  const s = await startConnect("bye", "gh", "admin");
  assert.equal((await callback(s, s.cookie)).status, 200);
  assertError(await ask(t, "DELETE", `${accounts}/bye`, { as: "member" }), 403, /needs the admin role or to be its granter/);
  const revokedBefore = peer.revokedTokens.length;
  const res = await ask(t, "DELETE", `${accounts}/bye`, { as: "admin" });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.body, { name: "bye", revoked: true });
  assert.equal(peer.revokedTokens.length, revokedBefore + 1);
  assert.equal(await countRows(t, "connection_names where name = 'bye'"), 0);
  assertError(await ask(t, "DELETE", `${accounts}/bye`, { as: "admin" }), 404, /no connected account bye/);
});

void test("disabling by hand: the granter or an admin switches it off (others refused), a job naming it fails, reconnecting makes it usable", async () => {
  peer.user = { id: 4004, login: "dee" };
  const s = await startConnect("off");
  assert.equal((await callback(s, s.cookie)).status, 200);
  const disable = (as: "viewer" | "member" | "admin" | "outsider" | "none", name = "off") =>
    ask(t, "POST", `${accounts}/${name}/disable`, { as, body: {} });
  await assertCallerRefusals(t, { method: "POST", url: `${accounts}/off/disable`, body: {} }, "member");
  assertError(await disable("member", "nobody"), 404, /no connected account nobody/);
  // NUL, a lone surrogate, broken percent-encoding, an encoded slash or space, 10k characters; `..` routes nowhere.
  const hostile: Array<[string, number, RegExp]> = [
    ["a%00b", 400, /NUL|U\+0000/],
    ["%ED%A0%80", 400, /./],
    ["%E0%A4%A", 400, /./],
    ["a%2Fb", 400, /credential name "a\/b" is not allowed/],
    ["a%20b", 400, /credential name "a b" is not allowed/],
    ["x".repeat(10_000), 414, /is over 100 characters/],
    ["%2e%2e", 404, /./],
  ];
  for (const [name, status, message] of hostile)
    assertError(await disable("admin", name), status, message, `disable of ${name.slice(0, 20)}`);
  assert.equal((await listed()).find((a) => a["name"] === "off")?.["status"], "active", "nothing was disabled");

  const res = await disable("member");
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.body, { name: "off", status: "disabled", changed: true });
  assert.deepEqual((await disable("admin")).body, { name: "off", status: "disabled", changed: false }, "a second disable changes nothing");
  assert.equal((await listed()).find((a) => a["name"] === "off")?.["status"], "disabled");
  const { rows } = await t.db.pool.query<{ refresh_after: Date | null }>(`select refresh_after from accounts where name = 'off'`);
  assert.equal(rows[0]?.refresh_after, null, "the renewal loop has nothing to plan");

  // A job naming it fails at its claim with the reconnect message; no token is handed out.
  const run = await ask(t, "POST", `${t.project.base}/runs`, {
    body: { kind: "script", source: "echo $TOKEN\n", filename: "job.sh", credentials: { TOKEN: "off" } },
  });
  assert.equal(run.status, 201, run.text);
  const job = await dispatchJob(t, (run.body as { id: string }).id);
  const claimed = await ask(t, "POST", "/agent/v1/claim", { as: { token: job.token }, body: { agent_id: "agent-1" } });
  assertError(claimed, 409, /TOKEN: connected account "off" is disabled: reconnect it on the Connections page/);
  assert.doesNotMatch(claimed.text, /at_/, "no token in the refusal");

  // Reconnecting under the same name, to the same far-side account, makes it usable again.
  const again = await startConnect("off");
  assert.equal((await callback(again, again.cookie)).status, 200);
  assert.equal((await listed()).find((a) => a["name"] === "off")?.["status"], "active");
});
