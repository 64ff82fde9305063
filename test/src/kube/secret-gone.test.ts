// A deleted Kubernetes Secret fails closed: the FlowSecret's secret, the FlowCredential's credential
// and the FlowEventHook's hook are withdrawn from Postgres in the pass that sets Ready=False (a job no
// longer gets the secret, a run declaring the credential fails as for any missing credential, ingest
// answers a delivery with the old secret 404), and come back with the Secret. A Secret the API server
// cannot be asked about (503, 403) withdraws nothing: Ready is Unknown and says why. The real
// reconcilers and client-node against the fake API server, the real ingest app on the same Postgres.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { after, before, describe, test } from "node:test";
import pino from "pino";
import type { FastifyInstance } from "fastify";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { resolveJobCredentials } from "@flowsvc/core";
import { buildApp } from "@flowsvc/ingest";
import {
  findProject,
  getHook,
  getSecretMeta,
  listCredentials,
  loadSealedSecrets,
  openRunCredentials,
  openSecretValue,
  setRunCredentials,
  withTransaction,
} from "@flowsvc/store";
import { waitFor } from "../support/wait.js";
import { GROUP, VERSION, getCr, readyOf, scriptRun, startHarness, type Harness, type TestCondition } from "./reconcile-harness.js";

const NS = "team-g";
const SECRET = "rotating";
const VALUES = {
  token: "tok-" + "a".repeat(24),
  cred: "bearer-" + "b".repeat(24),
  hook: "fhs-" + "c".repeat(24),
  key: "k-" + "d".repeat(30),
};
const CRS = [
  ["flowsecrets", "api-key"],
  ["flowcredentials", "deployer"],
  ["floweventhooks", "inbound"],
] as const;
let h: Harness;
let ingest: FastifyInstance;
let scope: { org: string; project: string; orgId: string; projectId: string };

const apply = (plural: string, kind: string, name: string, spec: object) =>
  h.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    plural,
    namespace: NS,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name }, spec },
  });
const putSecret = (data: Record<string, string>) =>
  h.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: SECRET }, stringData: data } });
const ready = async (plural: string, name: string) => readyOf(await getCr(h, plural, NS, name));
const allReady = (label: string, want: (c: TestCondition | undefined) => boolean) =>
  waitFor(label, async () => (await Promise.all(CRS.map(([p, n]) => ready(p, n)))).every(want), 10_000, 20);
/** A change of metadata only: the reconciler looks at each CR again at once (not after its retry backoff). */
const touchAll = async (n: number) => {
  for (const [plural, name] of CRS)
    await h.custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, plural, namespace: NS, name, body: { metadata: { annotations: { touched: String(n) } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
};

/** A delivery to the hook, with the shared secret and the HMAC of its body under the signing key. */
const deliver = async (secret: string, key: string): Promise<number> => {
  const body = '{"ref":"main"}';
  const res = await ingest.inject({
    method: "POST",
    url: `/api/v1/hooks/acme/${NS}/inbound`,
    headers: {
      "content-type": "application/json",
      "x-flow-hook-secret": secret,
      "x-signature": `sha256=${createHmac("sha256", key).update(body).digest("hex")}`,
    },
    payload: body,
  });
  return res.statusCode;
};

/** What a job of a run declaring DEPLOY=deployer gets at its claim (the claim's own resolver and reads). */
const claimCredentials = async () => {
  const runId = await scriptRun(h, scope.projectId);
  await withTransaction(h.db.pool, (tx) => setRunCredentials(tx, runId, { DEPLOY: "deployer" }));
  return resolveJobCredentials({ ...(await openRunCredentials(h.db.pool, h.keyring, runId, scope)), trusted: true });
};
const injectedSecrets = async () => (await loadSealedSecrets(h.db.pool, scope.projectId)).map((s) => s.name);

/** Each value as the Secret gave it: the secret sealed, the credential resolved for a run, the hook taking a signed delivery. */
const assertUsable = async () => {
  assert.equal(await openSecretValue(h.db.pool, h.keyring, scope, "API_KEY"), VALUES.token);
  assert.deepEqual(await claimCredentials(), { ok: true, env: { DEPLOY: VALUES.cred }, masks: [VALUES.cred] });
  assert.equal(await deliver(VALUES.hook, VALUES.key), 202);
};

before(async () => {
  h = await startHarness({ namespaces: [{ name: NS, org: "acme" }], publicUrl: "https://flow.example" });
  ingest = buildApp(
    { pool: h.db.pool, keyring: h.keyring, listener: h.listener, resources: h.pgStore, publicUrl: undefined, leaseMs: 15_000 },
    pino({ level: "silent" }),
  );
  await ingest.ready();
  await putSecret(VALUES);
  const ref = (key: string) => ({ name: SECRET, key });
  await apply("flowsecrets", "FlowSecret", "api-key", { valueFrom: { secretKeyRef: ref("token") } });
  await apply("flowcredentials", "FlowCredential", "deployer", { kind: "bearer", valueFrom: { secretKeyRef: ref("cred") } });
  await apply("floweventhooks", "FlowEventHook", "inbound", {
    event_type: "deploy.requested",
    hmac_header: "X-Signature",
    hmac_prefix: "sha256=",
    secretRef: ref("hook"),
    signingKeyRef: ref("key"),
  });
  await allReady("all Ready", (c) => c?.status === "True");
  scope = (await findProject(h.db.pool, "acme", NS))!;
});
after(async () => {
  await ingest?.close();
  await h?.close();
});

describe("a Secret a FlowSecret, FlowCredential or FlowEventHook reads", () => {
  test("deleted: each value is withdrawn in the pass that sets Ready=False; recreated: each is back and Ready", async () => {
    await assertUsable();
    await h.core.deleteNamespacedSecret({ namespace: NS, name: SECRET });
    await allReady("all SecretNotFound", (c) => c?.status === "False" && c.reason === "SecretNotFound");
    // No wait here: the rows went before the status said so.
    assert.equal(await getSecretMeta(h.db.pool, scope.projectId, "API_KEY"), undefined);
    assert.ok(!(await injectedSecrets()).includes("API_KEY"), "a job no longer gets the secret");
    assert.equal((await listCredentials(h.db.pool, scope.projectId)).length, 0);
    assert.deepEqual(await claimCredentials(), {
      ok: false,
      problems: ['DEPLOY: credential "deployer" is not set in this project: set it with `flow credential set deployer --kind ...`'],
    });
    assert.equal(await getHook(h.db.pool, scope.projectId, "inbound"), undefined);
    assert.equal(await deliver(VALUES.hook, VALUES.key), 404, "a delivery with the old secret and key is refused");
    assert.equal(
      (await ready("flowsecrets", "api-key"))?.message,
      `Secret ${NS}/${SECRET} not found (key token): the value is withdrawn until it is back`,
    );
    assert.equal(
      (await ready("floweventhooks", "inbound"))?.message,
      `secretRef: Secret ${NS}/${SECRET} not found (key hook): event hook inbound is removed (deliveries get 404) until it is back`,
    );
    assert.equal((await getCr(h, "flowsecrets", NS, "api-key"))?.status?.setAt, undefined, "no setAt for a value that is gone");

    await putSecret(VALUES);
    await allReady("all Ready again", (c) => c?.status === "True");
    await assertUsable();

    // A key that goes is as a Secret that goes, for the CR that reads it only.
    const { cred: _gone, ...rest } = VALUES;
    await h.core.replaceNamespacedSecret({ namespace: NS, name: SECRET, body: { metadata: { name: SECRET }, stringData: rest } });
    await waitFor("KeyNotFound", async () => (await ready("flowcredentials", "deployer"))?.reason === "KeyNotFound", 10_000, 20);
    assert.equal((await listCredentials(h.db.pool, scope.projectId)).length, 0);
    assert.equal((await ready("flowsecrets", "api-key"))?.status, "True");
    assert.equal(await deliver(VALUES.hook, VALUES.key), 202);
    await h.core.replaceNamespacedSecret({ namespace: NS, name: SECRET, body: { metadata: { name: SECRET }, stringData: VALUES } });
    await allReady("all Ready once more", (c) => c?.status === "True");
  });

  test("a Secret the API server will not answer for (503, then 403) withdraws nothing: Ready is Unknown and says why", async () => {
    await assertUsable();
    const secretPath = `/api/v1/namespaces/${NS}/secrets/${SECRET}`;
    h.api.refuse((r) => r.method === "GET" && r.path === secretPath, 503);
    try {
      // The watch says DELETED; the GET that would confirm it fails.
      await h.core.deleteNamespacedSecret({ namespace: NS, name: SECRET });
      await allReady("all SecretUnreadable", (c) => c?.status === "Unknown" && c.reason === "SecretUnreadable");
      assert.match(
        (await ready("flowsecrets", "api-key"))?.message ?? "",
        /could not be read \(the API server answered 503\): a value already set stays in effect/,
      );
      await assertUsable();

      h.api.refuse(undefined);
      h.api.forbid((a) => a.verb === "get" && a.resource === "secrets" && a.name === SECRET);
      await touchAll(1);
      await allReady("all forbidden", (c) => c?.status === "Unknown" && (c.message ?? "").includes("answered 403"));
      await assertUsable();
    } finally {
      h.api.refuse(undefined);
      h.api.forbid(undefined);
    }
    // Answered at last: a 404, and the values go.
    await touchAll(2);
    await allReady("all SecretNotFound", (c) => c?.status === "False" && c.reason === "SecretNotFound");
    assert.equal(await openSecretValue(h.db.pool, h.keyring, scope, "API_KEY"), undefined);
    assert.equal(await deliver(VALUES.hook, VALUES.key), 404);
  });
});
