// The cluster's bootstrap admin (controller/src/initial-admin.ts, README "Run it on Kubernetes"):
// the controller's start function against the fake API server, the real reconcilers and a real
// Postgres; the token read back from the Secret answers a real ingest app; a second start, two
// starts at once, a Secret RBAC refuses; the recovery command as the controller's real bin.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import pino from "pino";
import type { FastifyInstance } from "fastify";
import type { V1Secret } from "@kubernetes/client-node";
import { buildApp } from "@flowsvc/ingest";
import { createPgResourceStore, digestToken, findProject, mintAdminToken } from "@flowsvc/store";
import { ensureInitialAdmin, type InitialAdminSettings } from "@flowsvc/controller";
import { waitFor } from "../support/wait.js";
import { REPO_ROOT } from "../support/server.js";
import { GROUP, VERSION, startHarness, type Harness } from "./reconcile-harness.js";

const HOME_NS = "flowsvc";
const SETTINGS: InitialAdminSettings = {
  enabled: true,
  secretName: "r-flowsvc-initial-admin-token",
  labels: { "app.kubernetes.io/name": "flowsvc", "app.kubernetes.io/instance": "r" },
};

let h: Harness;
let ingest: FastifyInstance;
/** Every line the controller's logger printed. */
const logLines: string[] = [];
/** Every token seen in the Secret or printed by the command. */
const tokensSeen = new Set<string>();
const logger = pino({ level: "trace" }, { write: (line: string) => void logLines.push(line) });

const start = () => ensureInitialAdmin({ pool: h.db.pool, core: h.core, namespace: HOME_NS, settings: SETTINGS, logger });
const readSecret = (): Promise<V1Secret | undefined> =>
  h.core.readNamespacedSecret({ namespace: HOME_NS, name: SETTINGS.secretName }).catch(() => undefined);
const secretToken = async (): Promise<string> => {
  const data = (await readSecret())?.data?.["token"];
  assert.ok(data, "the Secret holds key token");
  const token = Buffer.from(data, "base64").toString("utf8");
  tokensSeen.add(token);
  return token;
};
const whoami = async (token: string) => {
  const r = await ingest.inject({ method: "GET", url: "/api/v1/whoami", headers: { authorization: `Bearer ${token}` } });
  return { status: r.statusCode, body: r.json<{ user: string; projects: Array<{ org: string; project: string; role: string }> }>() };
};
const admins = async () =>
  (
    await h.db.pool.query<{ users: number; tokens: number }>(
      `select (select count(*)::int from users where name = 'admin') as users,
              (select count(*)::int from api_tokens t join users u on u.id = t.user_id where u.name = 'admin') as tokens`,
    )
  ).rows[0]!;
/** A FlowHandler in a namespace: the controller makes the namespace's project on this first need. */
const projectFor = async (namespace: string): Promise<void> => {
  await h.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    plural: "flowhandlers",
    namespace,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: "FlowHandler",
      metadata: { name: "h" },
      spec: { events: ["deploy.*"], reaction: { kind: "script", source: "echo hi\n", filename: "h.sh" } },
    },
  });
  await waitFor(`the project of namespace ${namespace}`, async () => (await findProject(h.db.pool, "default", namespace)) !== undefined);
};
const dropAdmin = () => h.db.pool.query(`delete from users where name = 'admin'`);

before(async () => {
  h = await startHarness({ namespaces: [{ name: HOME_NS }, { name: "before" }] });
  ingest = buildApp(
    {
      pool: h.db.pool,
      keyring: h.keyring,
      listener: h.listener,
      resources: createPgResourceStore(h.db.pool, h.keyring),
      publicUrl: undefined,
      leaseMs: 15_000,
    },
    pino({ level: "silent" }),
  );
  await ingest.ready();
  await projectFor("before");
});

after(async () => {
  await ingest?.close();
  await h?.close();
});

test("the first start makes admin and the Secret; its token is admin of projects made before and after; a second start changes nothing", async () => {
  const made = await start();
  assert.equal(made.created, true);
  const secret = (await readSecret())!;
  assert.equal(secret.type, "Opaque");
  assert.equal(secret.metadata?.labels?.["app.kubernetes.io/instance"], "r");
  const token = await secretToken();
  assert.match(token, /^flw_[A-Za-z0-9_-]{43}$/);
  let me = await whoami(token);
  assert.equal(me.status, 200);
  assert.equal(me.body.user, "admin");
  assert.deepEqual(me.body.projects, [{ org: "default", project: "before", role: "admin" }]);

  await h.core.createNamespace({ body: { metadata: { name: "after" } } });
  await projectFor("after");
  me = await whoami(token);
  assert.deepEqual(
    me.body.projects.map((p) => `${p.org}/${p.project}:${p.role}`),
    ["default/after:admin", "default/before:admin"],
  );

  const again = await start();
  assert.equal(again.created, false);
  assert.equal((await readSecret())?.metadata?.resourceVersion, secret.metadata?.resourceVersion, "the Secret untouched");
  assert.deepEqual(await admins(), { users: 1, tokens: 1 });
  // The operator deleted the Secret: still nothing.
  await h.core.deleteNamespacedSecret({ namespace: HOME_NS, name: SETTINGS.secretName });
  assert.equal((await start()).created, false);
  assert.equal(await readSecret(), undefined);
});

test("two starts at once (a database made anew, an old Secret): one admin, one token, and the Secret's token works", async () => {
  await dropAdmin();
  await h.core.createNamespacedSecret({
    namespace: HOME_NS,
    body: { metadata: { name: SETTINGS.secretName }, stringData: { token: "stale" } },
  });
  const results = await Promise.all([start(), start()]);
  assert.deepEqual(results.map((r) => r.created).sort(), [false, true]);
  assert.deepEqual(await admins(), { users: 1, tokens: 1 });
  const token = await secretToken();
  const { rows } = await h.db.pool.query<{ digest: Buffer }>(`select digest from api_tokens`);
  assert.ok(
    rows.some((r) => r.digest.equals(digestToken(token))),
    "the Secret holds the one token's value",
  );
  assert.equal((await whoami(token)).body.user, "admin");
});

test("a Secret RBAC refuses: no admin, the start fails naming the Secret and the RBAC, no token in it", async () => {
  await dropAdmin();
  await h.core.deleteNamespacedSecret({ namespace: HOME_NS, name: SETTINGS.secretName });
  h.api.forbid((a) => a.resource === "secrets" && a.namespace === HOME_NS && a.verb === "create");
  try {
    const err = await start().then(
      () => assert.fail("started without the Secret"),
      (e: unknown) => e as Error,
    );
    assert.match(err.message, /^cannot write the initial admin token to Secret flowsvc\/r-flowsvc-initial-admin-token \(403: .*forbidden/);
    assert.match(
      err.message,
      /needs, in namespace flowsvc, create on secrets and get, update on secrets named r-flowsvc-initial-admin-token/,
    );
    assert.doesNotMatch(err.message, /flw_/);
    assert.deepEqual(await admins(), { users: 0, tokens: 0 }, "nothing committed");
  } finally {
    h.api.forbid(undefined);
  }
  assert.equal((await start()).created, true, "made once RBAC allows it");
  await secretToken();
});

test("flowsvc-controller admin-token prints a new working token; --revoke-others; refusals", async () => {
  const bin = join(REPO_ROOT, "controller", "dist", "main.js");
  const env = { PATH: process.env["PATH"], FLOWSVC_DATABASE_URL: h.db.url, FLOWSVC_MASTER_KEY: h.masterKey.toString("base64") };
  const run = (args: string[], over: Record<string, string> = {}) =>
    promisify(execFile)(process.execPath, [bin, "admin-token", ...args], { env: { ...env, ...over } }).then(
      (r) => ({ code: 0, ...r }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );
  const old = await secretToken();
  // The command and a refusal at once (one process's time): a database that does not answer.
  const [minted, unreachable] = await Promise.all([
    run(["--revoke-others"]),
    run([], { FLOWSVC_DATABASE_URL: "postgres://u:hunter2@127.0.0.1:1/none" }),
  ]);
  assert.equal(minted.code, 0, minted.stderr);
  const token = minted.stdout.trim();
  tokensSeen.add(token);
  assert.match(minted.stdout, /^flw_[A-Za-z0-9_-]{43}\n$/);
  assert.equal((await whoami(token)).body.user, "admin");
  assert.equal((await whoami(old)).status, 401, "--revoke-others: the Secret's token no longer works");
  assert.doesNotMatch(minted.stderr, /flw_/);
  assert.equal(unreachable.code, 1);
  assert.match(
    unreachable.stderr,
    /^flowsvc-controller admin-token: cannot reach the database \(FLOWSVC_DATABASE_URL\): connect ECONNREFUSED/,
  );
  assert.doesNotMatch(unreachable.stderr, /hunter2/);
  assert.equal(unreachable.stdout, "");
  // Without admin: the refusal the command prints (its message is the FlowError's), nothing made.
  await dropAdmin();
  await assert.rejects(mintAdminToken(h.db.pool, { revokeOthers: false }), /^FlowError: there is no user admin: the controller makes it/);
  assert.deepEqual(await admins(), { users: 0, tokens: 0 });
});

test("no token in any line the controller logged", () => {
  assert.ok(logLines.some((l) => l.includes("made the user admin; its token is in Secret flowsvc/r-flowsvc-initial-admin-token")));
  assert.ok(tokensSeen.size >= 3);
  for (const line of logLines) {
    assert.doesNotMatch(line, /flw_/);
    for (const t of tokensSeen) assert.ok(!line.includes(t) && !line.includes(Buffer.from(t).toString("base64")));
  }
});
