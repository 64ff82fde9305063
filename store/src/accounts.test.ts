/**
 * Connected accounts on a real Postgres (store/src/accounts.ts): the state row is single-use and
 * session-bound, a reconnect must land on the same far-side id, one refresh lease per account, the
 * version compare-and-set, and what the claim's resolver reads (store/src/credentials.ts).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { FlowError, holdingValue, resolveJobCredentials } from "@flowsvc/core";
import { addTestOrgKey, createTestDatabase, createTestProject, type TestDatabase } from "./testing.js";
import { Keyring } from "./keyring.js";
import { mintId } from "./mint.js";
import {
  applyRenewal,
  createOAuthState,
  forgetAccount,
  listAccounts,
  markRefreshing,
  readAccountForRefresh,
  saveGrantedAccount,
  takeOAuthState,
  takeRefreshLease,
  type GrantedAccount,
} from "./accounts.js";
import { credentialStamp, openProjectCredentials, openProjectHoldings, openRunCredentials, setCredential } from "./credentials.js";

let db: TestDatabase;
let keyring: Keyring;
let scope: { orgId: string; projectId: string };
let userId: string;

before(async () => {
  db = await createTestDatabase();
  keyring = await Keyring.create(db.pool, randomBytes(32));
  scope = await createTestProject(db.pool);
  await addTestOrgKey(db.pool, keyring, scope.orgId);
  userId = mintId("usr");
  await db.pool.query(`insert into users (id, name) values ($1, 'ann')`, [userId]);
  await db.pool.query(`insert into memberships (project_id, user_id, role) values ($1, $2, 'member')`, [scope.projectId, userId]);
});
after(async () => db?.drop());

const grant = (name: string, patch: Partial<GrantedAccount> = {}): GrantedAccount => ({
  scope,
  name,
  provider: "gh",
  farId: "1001",
  farLabel: "ann-gh",
  granterId: userId,
  tokens: { access_token: `at-${name}-secret`, refresh_token: `rt-${name}-secret` },
  expiresAtMs: Date.now() + 3_600_000,
  refreshAfterMs: Date.now() + 3_300_000,
  ...patch,
});

const refused = (re: RegExp) => (e: unknown) => e instanceof FlowError && re.test(e.message);

void test("an OAuth state is single-use, bound to its session, and gives back the sealed PKCE verifier", async () => {
  const input = { scope, userId, sessionId: "sess-1", name: "gh", provider: "gh", codeVerifier: "verifier-xyz" };
  const state = await createOAuthState(db.pool, keyring, input);
  const stored = await db.pool.query<{ n: string }>(
    `select count(*) as n from oauth_states where state_digest = $1 or position(convert_to('verifier-xyz', 'UTF8') in sealed_verifier) > 0`,
    [state],
  );
  assert.equal(stored.rows[0]?.n, "0", "neither the state nor the verifier is stored in clear");
  const taken = await takeOAuthState(db.pool, keyring, { state, sessionId: "sess-1" });
  assert.equal(taken.codeVerifier, "verifier-xyz");
  assert.equal(taken.userId, userId);
  await assert.rejects(
    takeOAuthState(db.pool, keyring, { state, sessionId: "sess-1" }),
    refused(/not valid \(unknown, already used/),
    "a replay",
  );
  // Another session's callback burns the state too: the attacker's browser cannot finish, nor retry.
  const other = await createOAuthState(db.pool, keyring, input);
  await assert.rejects(takeOAuthState(db.pool, keyring, { state: other, sessionId: "sess-evil" }), refused(/another browser session/));
  await assert.rejects(takeOAuthState(db.pool, keyring, { state: other, sessionId: "sess-1" }), refused(/already used/));
  const old = await createOAuthState(db.pool, keyring, input);
  await db.pool.query(`update oauth_states set expires_at = now() - interval '1 second'`);
  await assert.rejects(takeOAuthState(db.pool, keyring, { state: old, sessionId: "sess-1" }), refused(/expired/));
  await assert.rejects(takeOAuthState(db.pool, keyring, { state: "\0\ud800", sessionId: "sess-1" }), refused(/not valid/));
});

void test("a reconnect must land on the same far-side id at the same provider; a credential's name is refused", async () => {
  await saveGrantedAccount(db.pool, keyring, grant("acct"));
  await db.pool.query(`update accounts set status = 'needs_reauth' where name = 'acct'`);
  await assert.rejects(
    saveGrantedAccount(db.pool, keyring, grant("acct", { farId: "2002", farLabel: "mallory" })),
    refused(/landed on a different account/),
  );
  await assert.rejects(
    saveGrantedAccount(db.pool, keyring, grant("acct", { provider: "other" })),
    refused(/landed on a different account/),
  );
  const [still] = await listAccounts(db.pool, scope.projectId);
  assert.equal(still?.status, "needs_reauth", "a refused reconnect leaves the account as it was");
  const back = await saveGrantedAccount(db.pool, keyring, grant("acct", { farLabel: "ann-renamed" }));
  assert.deepEqual([back.status, back.far_label, back.granter], ["active", "ann-renamed", "ann"]);
  assert.ok(!JSON.stringify(await listAccounts(db.pool, scope.projectId)).includes("secret"), "the list never carries a token");
  await setCredential(db.pool, keyring, { scope, name: "cred", value: { kind: "bearer", token: "x" } });
  await assert.rejects(saveGrantedAccount(db.pool, keyring, grant("cred")), refused(/already taken by a credential/));
});

void test("one refresh lease per account; writes go through the version read, a stale one writes nothing", async () => {
  await saveGrantedAccount(db.pool, keyring, grant("lease"));
  const key = { projectId: scope.projectId, name: "lease" };
  assert.equal(await takeRefreshLease(db.pool, key, { holder: "a", ttlMs: 60_000 }), true);
  assert.equal(await takeRefreshLease(db.pool, key, { holder: "b", ttlMs: 60_000 }), false, "another replica waits");
  const read = (await readAccountForRefresh(db.pool, keyring, key))!;
  assert.equal(read.tokens?.refresh_token, "rt-lease-secret");
  const v = (await markRefreshing(db.pool, key, read.version))!;
  assert.equal(await markRefreshing(db.pool, key, read.version), undefined, "a stale version does not move it");
  const decision = {
    status: "active" as const,
    tokens: { access_token: "new-at", refresh_token: "new-rt" },
    refreshAfterMs: null,
    attempts: 0,
    lastError: null,
  };
  assert.equal(await applyRenewal(db.pool, keyring, { key, scope, version: read.version, decision }), false);
  assert.equal(await applyRenewal(db.pool, keyring, { key, scope, version: v, decision }), true);
  assert.equal((await readAccountForRefresh(db.pool, keyring, key))?.tokens?.access_token, "new-at");
  await db.pool.query(`update account_refresh_leases set expires_at = now() - interval '1 second'`);
  assert.equal(await takeRefreshLease(db.pool, key, { holder: "b", ttlMs: 60_000 }), true, "an expired lease is taken over");
});

const runDeclaring = async (declared: Record<string, string>): Promise<string> => {
  const runId = mintId("run");
  await db.pool.query(
    `insert into runs (id, project_id, workflow, status, source, filename, interpreter, trigger, trusted, credentials)
     values ($1, $2, 'flowsvc/script/v1', 'running', 'echo', 's.sh', '{bash}', '{}', true, $3)`,
    [runId, scope.projectId, JSON.stringify(declared)],
  );
  return runId;
};

void test("the claim resolves an account like a credential; a status other than active/refreshing or a departed granter fails closed", async () => {
  await saveGrantedAccount(db.pool, keyring, grant("use"));
  const resolve = async (name: string, trusted = true) => {
    const { declared, holdings } = await openRunCredentials(db.pool, keyring, await runDeclaring({ TOKEN: name }), scope);
    return resolveJobCredentials({ declared, holdings, trusted });
  };
  assert.deepEqual(await resolve("use"), { ok: true, env: { TOKEN: "at-use-secret" }, masks: ["at-use-secret"] });
  assert.equal((await resolve("use", false)).ok, false, "an untrusted run gets no account");
  await db.pool.query(`update accounts set status = 'in_doubt' where name = 'use'`);
  const r = await resolve("use");
  assert.ok(!r.ok && /connected account "use" is in_doubt: reconnect it/.test(r.problems.join()), JSON.stringify(r));
  await db.pool.query(`update accounts set status = 'refreshing' where name = 'use'`);
  assert.equal((await resolve("use")).ok, true, "refreshing is still usable");
  // The second line: a granter who is no member (however that came about) is found at use and disabled.
  const stranger = mintId("usr");
  await db.pool.query(`insert into users (id, name) values ($1, 'stranger')`, [stranger]);
  await db.pool.query(`update accounts set granter_id = $1 where name = 'use'`, [stranger]);
  const gone = await resolve("use");
  assert.ok(!gone.ok && /is disabled/.test(gone.problems.join()), JSON.stringify(gone));
  assert.equal((await listAccounts(db.pool, scope.projectId)).find((a) => a.name === "use")?.status, "disabled");
});

void test("a granter who leaves disables their accounts in that transaction: a membership deleted, or the user; a project deleted takes its accounts", async () => {
  const leaver = mintId("usr");
  await db.pool.query(`insert into users (id, name) values ($1, 'leaver')`, [leaver]);
  await db.pool.query(`insert into memberships (project_id, user_id, role) values ($1, $2, 'member')`, [scope.projectId, leaver]);
  await saveGrantedAccount(db.pool, keyring, grant("left-1", { granterId: leaver }));
  await saveGrantedAccount(db.pool, keyring, grant("stays", { granterId: userId }));
  const statusOf = async (name: string) => (await listAccounts(db.pool, scope.projectId)).find((a) => a.name === name)?.status;
  await db.pool.query(`delete from memberships where user_id = $1`, [leaver]);
  assert.equal(await statusOf("left-1"), "disabled", "disabled by the delete itself, before any use");
  const { rows } = await db.pool.query<{ refresh_after: Date | null }>(`select refresh_after from accounts where name = 'left-1'`);
  assert.equal(rows[0]?.refresh_after, null, "never renewed");
  assert.equal(await statusOf("stays"), "active");

  await db.pool.query(`insert into memberships (project_id, user_id, role) values ($1, $2, 'member')`, [scope.projectId, leaver]);
  await saveGrantedAccount(db.pool, keyring, grant("left-2", { granterId: leaver }));
  await db.pool.query(`delete from users where id = $1`, [leaver]);
  assert.equal(await statusOf("left-2"), "disabled", "a user's deletion disables what they granted");
  assert.equal(await statusOf("stays"), "active");

  const other = await createTestProject(db.pool);
  await addTestOrgKey(db.pool, keyring, other.orgId);
  await db.pool.query(`insert into memberships (project_id, user_id, role) values ($1, $2, 'admin')`, [other.projectId, userId]);
  await saveGrantedAccount(db.pool, keyring, { ...grant("doomed"), scope: other });
  await db.pool.query(`delete from projects where id = $1`, [other.projectId]);
  assert.deepEqual(await listAccounts(db.pool, other.projectId), []);
});

void test("forgetting an account frees its name and answers its tokens for the revocation", async () => {
  await saveGrantedAccount(db.pool, keyring, grant("bye"));
  const gone = await forgetAccount(db.pool, keyring, { scope, name: "bye" });
  assert.deepEqual(gone, { provider: "gh", tokens: { access_token: "at-bye-secret", refresh_token: "rt-bye-secret" } });
  assert.equal(await forgetAccount(db.pool, keyring, { scope, name: "bye" }), undefined);
  const { rows } = await db.pool.query(`select 1 from connection_names where name = 'bye'`);
  assert.equal(rows.length, 0);
});

void test("the run maskers see each account's current token, and the stamp changes when it is renewed", async () => {
  await saveGrantedAccount(db.pool, keyring, grant("masked"));
  const before = await credentialStamp(db.pool, scope.projectId);
  const values = await openProjectCredentials(db.pool, keyring, scope);
  assert.ok(values.some((v) => v.kind === "bearer" && v.token === "at-masked-secret"));
  const key = { projectId: scope.projectId, name: "masked" };
  const read = (await readAccountForRefresh(db.pool, keyring, key))!;
  const decision = {
    status: "active" as const,
    tokens: { access_token: "at-masked-2" },
    refreshAfterMs: null,
    attempts: 0,
    lastError: null,
  };
  assert.ok(await applyRenewal(db.pool, keyring, { key, scope, version: read.version, decision }));
  assert.notEqual(await credentialStamp(db.pool, scope.projectId), before);
  assert.ok((await openProjectCredentials(db.pool, keyring, scope)).some((v) => v.kind === "bearer" && v.token === "at-masked-2"));
});

void test("an http node's credential name resolves to a bearer value for a usable account, and fails for one to reconnect", async () => {
  await saveGrantedAccount(db.pool, keyring, grant("http-acct"));
  await setCredential(db.pool, keyring, { scope, name: "http-cred", value: { kind: "api_key", header: "x-key", value: "k" } });
  const holdings = await openProjectHoldings(db.pool, keyring, scope, ["http-acct", "http-cred", "nothing"]);
  assert.deepEqual(holdingValue("http-acct", holdings.get("http-acct")), {
    ok: true,
    value: { kind: "bearer", token: "at-http-acct-secret" },
  });
  assert.deepEqual(holdingValue("http-cred", holdings.get("http-cred")), {
    ok: true,
    value: { kind: "api_key", header: "x-key", value: "k" },
  });
  assert.match(JSON.stringify(holdingValue("nothing", holdings.get("nothing"))), /is not set in this project/);
  await db.pool.query(`update accounts set status = 'needs_reauth' where name = 'http-acct'`);
  const again = await openProjectHoldings(db.pool, keyring, scope, ["http-acct"]);
  assert.match(JSON.stringify(holdingValue("http-acct", again.get("http-acct"))), /is needs_reauth: reconnect it/);
});
