/**
 * Connected-account renewal (controller/src/accounts/renewal-loop.ts) against the OAuth provider
 * peer, in-process on a real Postgres: rotation, an unknown outcome with a rotating provider
 * (`in_doubt`, the old token never sent again), failures before sending and 5xx (back off),
 * `invalid_grant` (`needs_reauth`), two loops racing for the same accounts, and a disabled account.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import pino from "pino";
import { parseAccountProviders, type AccountProvider } from "@flowsvc/core";
import {
  Keyring,
  addTestOrgKey,
  createTestDatabase,
  createTestProject,
  mintId,
  readAccountForRefresh,
  disableAccount,
  saveGrantedAccount,
  waitFor,
  type TestDatabase,
} from "@flowsvc/store";
import { renewAccount, renewDueAccounts, type RenewalDeps } from "@flowsvc/controller";
import { OAuthProviderPeer } from "./peers/oauth-provider.js";

let db: TestDatabase;
let keyring: Keyring;
let scope: { orgId: string; projectId: string };
let userId: string;
const peers: OAuthProviderPeer[] = [];

before(async () => {
  db = await createTestDatabase();
  keyring = await Keyring.create(db.pool, randomBytes(32));
  scope = await createTestProject(db.pool);
  await addTestOrgKey(db.pool, keyring, scope.orgId);
  userId = mintId("usr");
  await db.pool.query(`insert into users (id, name) values ($1, 'ann')`, [userId]);
});
after(async () => {
  await Promise.all(peers.map((p) => p.close()));
  await db?.drop();
});

const startPeer = async (opts: ConstructorParameters<typeof OAuthProviderPeer>[0]): Promise<OAuthProviderPeer> => {
  const peer = await new OAuthProviderPeer(opts).start();
  peers.push(peer);
  return peer;
};

const depsFor = (providers: AccountProvider[], extra: Partial<RenewalDeps> = {}): RenewalDeps => ({
  pool: db.pool,
  keyring,
  providers: new Map(providers.map((p) => [p.name, p])),
  log: pino({ level: "silent" }),
  timeoutMs: 2_000,
  random: () => 0,
  ...extra,
});

const providerOf = (peer: OAuthProviderPeer, name: string, extra: Record<string, unknown> = {}): AccountProvider =>
  parseAccountProviders(JSON.stringify([peer.providerConfig(name, extra)]), "http://127.0.0.1:1/oauth/callback").providers.get(name)!;

let n = 0;
/** A connected account holding a fresh grant of the peer, due for renewal now. */
const dueAccount = async (
  peer: OAuthProviderPeer,
  provider: string,
): Promise<{ key: { projectId: string; name: string }; refresh: string }> => {
  const name = `acct-${++n}`;
  const tokens = peer.mintGrant();
  await saveGrantedAccount(db.pool, keyring, {
    scope,
    name,
    provider,
    farId: "1001",
    farLabel: "ann",
    granterId: userId,
    tokens,
    expiresAtMs: Date.now() + 60_000,
    refreshAfterMs: Date.now() - 1000,
  });
  return { key: { projectId: scope.projectId, name }, refresh: tokens.refresh_token };
};

const stateOf = async (key: { projectId: string; name: string }) => {
  const a = (await readAccountForRefresh(db.pool, keyring, key))!;
  const { rows } = await db.pool.query<{ refresh_after: Date | null; last_error: string | null }>(
    `select refresh_after, last_error from accounts where project_id = $1 and name = $2`,
    [key.projectId, key.name],
  );
  return { ...a, refreshAfter: rows[0]?.refresh_after ?? null, lastError: rows[0]?.last_error ?? null };
};

void test("a due account is renewed: the rotated refresh token is stored, the next renewal is planned from expires_in", async () => {
  const peer = await startPeer({ rotatesRefreshToken: true, reuseRevokesFamily: true, expiresIn: 3600 });
  const p = providerOf(peer, "rot");
  const { key, refresh } = await dueAccount(peer, "rot");
  assert.equal(await renewAccount(depsFor([p]), key, "loop-a"), "renewed");
  const a = await stateOf(key);
  assert.equal(a.status, "active");
  assert.notEqual(a.tokens?.refresh_token, refresh);
  assert.ok(peer.familyAlive(a.tokens!.refresh_token!));
  const inMs = a.refreshAfter!.getTime() - Date.now();
  assert.ok(inMs > 3_200_000 && inMs <= 3_300_000, `renewal planned ${inMs} ms ahead`);
  assert.equal(await renewAccount(depsFor([p]), key, "loop-a"), "skipped", "not due any more");
  assert.deepEqual(peer.presentedTwice(), []);
});

void test("with a rotating provider, a connection dropped after the refresh was sent makes the account in_doubt, and the old token is never sent again", async () => {
  const peer = await startPeer({ rotatesRefreshToken: true, reuseRevokesFamily: true, expiresIn: 3600 });
  const p = providerOf(peer, "rot2");
  const { key, refresh } = await dueAccount(peer, "rot2");
  peer.tokenFaults.push({ kind: "drop", applied: true });
  assert.equal(await renewAccount(depsFor([p]), key, "loop-a"), "in_doubt");
  await db.pool.query(`update accounts set refresh_after = now() - interval '1 hour' where name = $1`, [key.name]);
  await renewDueAccounts(depsFor([p]), "loop-b");
  await renewAccount(depsFor([p]), key, "loop-c");
  assert.equal(peer.presented.get(refresh), 1, "the old refresh token was presented exactly once");
  const a = await stateOf(key);
  assert.equal(a.status, "in_doubt");
  assert.match(a.lastError ?? "", /no answer/);
});

void test("a timeout after sending is in_doubt with a rotating provider, and backs off with one that does not rotate", async () => {
  const rot = await startPeer({ rotatesRefreshToken: true, reuseRevokesFamily: false, expiresIn: 3600 });
  const still = await startPeer({ rotatesRefreshToken: false, reuseRevokesFamily: false, expiresIn: 3600 });
  const [pr, ps] = [providerOf(rot, "rot3"), providerOf(still, "still")];
  const a = await dueAccount(rot, "rot3");
  const b = await dueAccount(still, "still");
  // Both providers hold the request past the client's 200 ms: a timeout after sending.
  rot.tokenFaults.push({ kind: "hold" });
  still.tokenFaults.push({ kind: "hold" });
  const deps = depsFor([pr, ps], { timeoutMs: 200 });
  assert.equal(await renewAccount(deps, a.key, "loop-a"), "in_doubt");
  assert.equal(await renewAccount(deps, b.key, "loop-a"), "refreshing");
  const sb = await stateOf(b.key);
  assert.equal(sb.attempts, 1);
  assert.ok(sb.refreshAfter!.getTime() > Date.now(), "retried later, not now");
  // The retry sends the same (unrotated) token and succeeds.
  await db.pool.query(`update accounts set refresh_after = now() where name = $1`, [b.key.name]);
  assert.equal(await renewAccount(deps, b.key, "loop-a"), "renewed");
  assert.equal((await stateOf(b.key)).attempts, 0);
});

void test("nothing sent (no provider listening) and 5xx back off with growing delays; invalid_grant means needs_reauth", async () => {
  const peer = await startPeer({ rotatesRefreshToken: true, reuseRevokesFamily: true, expiresIn: 600 });
  const p = providerOf(peer, "flaky");
  const down = providerOf(peer, "down", { token_url: "http://127.0.0.1:1/token" });
  const a = await dueAccount(peer, "down");
  assert.equal(await renewAccount(depsFor([down]), a.key, "loop-a"), "refreshing");
  const sa = await stateOf(a.key);
  assert.equal(sa.status, "refreshing", "still usable while retrying");
  assert.match(sa.lastError ?? "", /not sent/);

  const b = await dueAccount(peer, "flaky");
  peer.tokenFaults.push({ kind: "status", status: 503 }, { kind: "status", status: 502 });
  assert.equal(await renewAccount(depsFor([p]), b.key, "loop-a"), "refreshing");
  const first = (await stateOf(b.key)).refreshAfter!.getTime();
  await db.pool.query(`update accounts set refresh_after = now() where name = $1`, [b.key.name]);
  assert.equal(await renewAccount(depsFor([p]), b.key, "loop-a"), "refreshing");
  const second = await stateOf(b.key);
  assert.equal(second.attempts, 2);
  assert.ok(second.refreshAfter!.getTime() - Date.now() > first - Date.now(), "the second delay is longer");

  const c = await dueAccount(peer, "flaky");
  await fetch(`${peer.url}/revoke`, {
    method: "POST",
    body: new URLSearchParams({ token: c.refresh, client_id: peer.opts.clientId, client_secret: peer.opts.clientSecret }),
  });
  assert.equal(await renewAccount(depsFor([p]), c.key, "loop-a"), "needs_reauth");
  assert.equal((await stateOf(c.key)).refreshAfter, null, "never retried by itself");
});

void test("two renewal loops racing over the same due accounts refresh each exactly once", async () => {
  const peer = await startPeer({ rotatesRefreshToken: true, reuseRevokesFamily: true, expiresIn: 3600 });
  const p = providerOf(peer, "race");
  const keys = [];
  for (let i = 0; i < 30; i++) keys.push(await dueAccount(peer, "race"));
  const served = peer.refreshesServed;
  await Promise.all([
    renewDueAccounts(depsFor([p], { concurrency: 4 }), "loop-a"),
    renewDueAccounts(depsFor([p], { concurrency: 4 }), "loop-b"),
  ]);
  assert.equal(peer.refreshesServed - served, 30);
  assert.deepEqual(peer.presentedTwice(), []);
  for (const k of keys) assert.equal((await stateOf(k.key)).status, "active");
});

void test("a renewal whose process died after sending (no outcome written) is in_doubt with a rotating provider; the token is not sent again", async () => {
  const peer = await startPeer({ rotatesRefreshToken: true, reuseRevokesFamily: true, expiresIn: 3600 });
  const p = providerOf(peer, "crash");
  const { key, refresh } = await dueAccount(peer, "crash");
  // What a loop killed between markRefreshing and applyRenewal leaves behind (its lease expired).
  await db.pool.query(`update accounts set status = 'refreshing', sending_since = now() where name = $1`, [key.name]);
  assert.equal(await renewAccount(depsFor([p]), key, "loop-b"), "in_doubt");
  assert.equal(peer.presented.get(refresh), undefined, "nothing was sent");
  assert.match((await stateOf(key)).lastError ?? "", /outcome never recorded/);
});

void test("a disabled account is never refreshed, even when due; one disabled while its refresh is in flight stays disabled", async () => {
  const peer = await startPeer({ rotatesRefreshToken: true, reuseRevokesFamily: true, expiresIn: 3600 });
  const p = providerOf(peer, "off");
  const { key, refresh } = await dueAccount(peer, "off");
  assert.equal(await disableAccount(db.pool, key), true);
  await db.pool.query(`update accounts set refresh_after = now() - interval '1 hour' where name = $1`, [key.name]);
  await renewDueAccounts(depsFor([p]), "loop-a"); // a pass over every due account (other tests' accounts may be due too)
  assert.equal(await renewAccount(depsFor([p]), key, "loop-a"), "skipped");
  assert.equal(peer.presented.get(refresh), undefined, "the disabled account's refresh token was never sent");

  const racing = await dueAccount(peer, "off");
  peer.tokenFaults.push({ kind: "hold" });
  const renewing = renewAccount(depsFor([p]), racing.key, "loop-a");
  await waitFor("the refresh to be on its way", async () => (await stateOf(racing.key)).sentUnrecorded, 5_000);
  assert.equal(await disableAccount(db.pool, racing.key), true);
  peer.releaseHeld(); // the provider answers only now, after the disable
  assert.equal(await renewing, "lost", "its outcome is not written over the disable");
  assert.equal((await stateOf(racing.key)).status, "disabled");
});
