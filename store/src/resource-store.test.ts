/**
 * The Postgres ResourceStore on a real Postgres and the real keyring: a hook's secret minted once or
 * given (from a Kubernetes Secret) and replaced; its signing key sealed, kept or dropped; a secret
 * sealed, never stored in the clear; handlers created and replaced.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { HookSpec, ResourceScope } from "@flowsvc/core";
import { addTestOrgKey, createTestDatabase, createTestProject, type TestDatabase } from "./testing.js";
import { Keyring } from "./keyring.js";
import { findIngestHook, hookSealName, hookSecretMatches } from "./hooks.js";
import { createPgResourceStore } from "./resource-store.js";
import { getHandler } from "./handlers.js";
import { loadSealedSecrets } from "./secrets.js";

let db: TestDatabase;
let keyring: Keyring;
let scope: ResourceScope;

before(async () => {
  db = await createTestDatabase();
  keyring = await Keyring.create(db.pool, randomBytes(32));
  const { orgId, projectId } = await createTestProject(db.pool);
  await addTestOrgKey(db.pool, keyring, orgId);
  // createTestProject names the org after its id and the project `p`.
  scope = { org: orgId, project: "p", orgId, projectId };
});
after(async () => db?.drop());

const token: HookSpec = { mode: "token", eventType: "ci.done", manifest: null, hmacHeader: null, hmacPrefix: null };
const manifest: HookSpec = { mode: "manifest", eventType: null, manifest: "github", hmacHeader: null, hmacPrefix: null };
const ingest = async (name: string) => (await findIngestHook(db.pool, scope.org, scope.project, name))!;

void test("a minted hook secret is answered once, on create; a replace keeps it; rotate mints a new one", async () => {
  const store = createPgResourceStore(db.pool, keyring);
  const made = await store.putHook(scope, { name: "ci", spec: token, signingKey: { kind: "none" }, secret: { kind: "mint" } });
  assert.equal(made.created, true);
  assert.match(made.minted ?? "", /^fhs_/);
  assert.ok(hookSecretMatches(made.minted!, (await ingest("ci")).secretDigest));
  const again = await store.putHook(scope, {
    name: "ci",
    spec: { ...token, eventType: "ci.other" },
    signingKey: { kind: "none" },
    secret: { kind: "mint" },
  });
  assert.deepEqual([again.created, again.minted, again.hook.event_type], [false, undefined, "ci.other"]);
  assert.ok(hookSecretMatches(made.minted!, (await ingest("ci")).secretDigest), "senders keep working");
  const rotated = await store.rotateHookSecret(scope, "ci");
  assert.ok(rotated?.minted && rotated.minted !== made.minted && rotated.hook.rotated_at !== null);
  assert.ok(!hookSecretMatches(made.minted!, (await ingest("ci")).secretDigest), "the old secret stopped working");
  assert.equal(await store.rotateHookSecret(scope, "nope"), undefined);
  assert.equal(await store.deleteHook(scope, "ci"), true);
  assert.equal(await store.deleteHook(scope, "ci"), false);
});

void test("a given hook secret (a secretRef) is set on create and on replace, never answered; rotated_at moves only when it changed", async () => {
  const store = createPgResourceStore(db.pool, keyring);
  const put = (value: string) =>
    store.putHook(scope, { name: "gitops", spec: token, signingKey: { kind: "none" }, secret: { kind: "given", value } });
  const first = await put("first-secret");
  assert.deepEqual([first.created, first.minted, first.hook.rotated_at], [true, undefined, null]);
  assert.ok(hookSecretMatches("first-secret", (await ingest("gitops")).secretDigest));
  assert.equal((await put("first-secret")).hook.rotated_at, null, "the same secret again is no rotation");
  const second = await put("second-secret");
  assert.notEqual(second.hook.rotated_at, null);
  const row = await ingest("gitops");
  assert.ok(hookSecretMatches("second-secret", row.secretDigest) && !hookSecretMatches("first-secret", row.secretDigest));
});

void test("a signing key is sealed (not in the clear), kept on `keep`, dropped on `none`", async () => {
  const store = createPgResourceStore(db.pool, keyring);
  const KEY = "gh-signing-key-Välue";
  await store.putHook(scope, { name: "gh", spec: manifest, signingKey: { kind: "given", value: KEY }, secret: { kind: "mint" } });
  const sealed = (await ingest("gh")).keySealed!;
  assert.ok(!sealed.toString("latin1").includes("gh-signing-key"));
  const open = async () =>
    keyring.open(
      scope.orgId,
      { org: scope.orgId, project: scope.projectId, kind: "credential", name: hookSealName("gh") },
      (await ingest("gh")).keySealed!,
    );
  assert.equal(await open(), KEY);
  await store.putHook(scope, { name: "gh", spec: manifest, signingKey: { kind: "keep" }, secret: { kind: "mint" } });
  assert.equal(await open(), KEY, "kept");
  await store.putHook(scope, { name: "gh", spec: token, signingKey: { kind: "none" }, secret: { kind: "mint" } });
  assert.equal((await ingest("gh")).keySealed, null, "a token hook has no key");
});

void test("a secret is sealed, never stored in the clear; handlers are created then replaced; deletes say whether there was one", async () => {
  const store = createPgResourceStore(db.pool, keyring);
  const VALUE = "s3cr3t-\u00e9-value";
  const meta = await store.putSecret(scope, "API_TOKEN", VALUE);
  assert.equal(meta.name, "API_TOKEN");
  const [row] = await loadSealedSecrets(db.pool, scope.projectId);
  assert.ok(!Buffer.from(row!.sealed).toString("latin1").includes("s3cr3t"));
  assert.equal(
    await keyring.open(scope.orgId, { org: scope.orgId, project: scope.projectId, kind: "secret", name: "API_TOKEN" }, row!.sealed),
    VALUE,
  );
  assert.equal(await store.deleteSecret(scope, "API_TOKEN"), true);
  assert.equal(await store.deleteSecret(scope, "API_TOKEN"), false);

  const h = {
    name: "h",
    on: ["push"],
    when: null,
    reaction: { kind: "script" as const, source: "echo\n", filename: "h.sh" },
    tags: [],
    credentials: {},
  };
  assert.equal((await store.putHandler(scope, h)).created, true);
  const replaced = await store.putHandler(scope, { ...h, on: ["order.*"] });
  assert.deepEqual([replaced.created, replaced.handler.on], [false, ["order.*"]]);
  assert.deepEqual((await getHandler(db.pool, scope.projectId, "h"))?.on, ["order.*"]);
  assert.equal(await store.deleteHandler(scope, "h"), true);
  assert.equal(await store.deleteHandler(scope, "h"), false);
});
