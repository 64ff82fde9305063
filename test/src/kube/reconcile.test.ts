// The reconcilers against the fake API server, with the real client-node and a real Postgres:
// CR -> Postgres with status back (Ready, InvalidSpec), secretKeyRef sealing and rotation with no
// value in any CR, deletions missed while the controller was down, the Kubernetes ResourceStore,
// and the FlowRun mirror (size, TTL) through a dropped watch and a 410.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { parseGraph } from "@flowsvc/core";
import {
  appendLogs,
  claimConnectionName,
  ensureProject,
  findProject,
  finishRun,
  getHandler,
  getSecretMeta,
  getStoredGraph,
  listCredentials,
  listGraphEndpoints,
  openCredentialValue,
  openSecretValue,
  withTransaction,
} from "@flowsvc/store";
import { KubeResourceStore } from "@flowsvc/controller/kube";
import { waitFor } from "../support/wait.js";
import { GROUP, VERSION, getCr, readyOf, scriptRun, startHarness, type Cr, type Harness } from "./reconcile-harness.js";

const NS = "team-a";
const BILLING_KEY = "k3y-" + "q".repeat(24);
let h: Harness;

const cr = (plural: string) => ({ group: GROUP, version: VERSION, plural, namespace: NS });
const apply = (plural: string, kind: string, name: string, spec: object) =>
  h.custom.createNamespacedCustomObject({ ...cr(plural), body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name }, spec } });
const handlerSpec = (when?: string) => ({
  events: ["deploy.*"],
  ...(when ? { when } : {}),
  reaction: { kind: "script", source: "echo hi\n", filename: "h.sh" },
});
const kubectlYaml = async (what: string): Promise<string> =>
  (await promisify(execFile)("kubectl", ["--kubeconfig", h.api.kubeconfigPath, "get", what, "-n", NS, "-o", "yaml"])).stdout;
const readyIs = (plural: string, name: string, want: (c: ReturnType<typeof readyOf>) => boolean) =>
  waitFor(`${plural}/${name} Ready`, async () => want(readyOf(await getCr(h, plural, NS, name))), 10_000, 20);
const project = async () => (await findProject(h.db.pool, "acme", NS))!;
/**
 * Every write of FlowRun `name` from now on, in order, through the API server's own watch fan-out:
 * nothing a poll could miss (with a short TTL a FlowRun's end may be deleted between two polls).
 */
const flowRunWrites = (harness: Harness, name: string): { seen: Array<{ type: string; fr: Cr }>; stop: () => void } => {
  const seen: Array<{ type: string; fr: Cr }> = [];
  const stop = harness.api.hub.subscribe(
    {
      resource: `${GROUP}/flowruns`,
      filter: (o) => o.metadata?.["name"] === name,
      send: (type, o) => seen.push({ type, fr: structuredClone(o) as unknown as Cr }),
      close: () => undefined,
    },
    Number.MAX_SAFE_INTEGER,
  );
  return { seen, stop };
};
const endedWrite = (seen: ReadonlyArray<{ type: string; fr: Cr }>, status: string): Cr | undefined =>
  seen.find((w) => w.type !== "DELETED" && w.fr.status?.status === status)?.fr;
const scope = async () => {
  const p = await project();
  return { ...p };
};

before(async () => {
  h = await startHarness({ namespaces: [{ name: NS, org: "acme" }], ttlSeconds: 1, publicUrl: "https://flow.example" });
});
after(() => h.close());

describe("reconcilers", () => {
  test("a FlowHandler is in Postgres and Ready within 2 s; a bad `when` is Ready=False/InvalidSpec; delete removes it", async () => {
    const t0 = Date.now();
    await apply("flowhandlers", "FlowHandler", "on-deploy", handlerSpec('event.payload.env == "prod"'));
    await waitFor("handler Ready", async () => readyOf(await getCr(h, "flowhandlers", NS, "on-deploy"))?.status === "True", 2000, 20);
    assert.ok(Date.now() - t0 < 2000);
    const p = await project();
    assert.equal((await getHandler(h.db.pool, p.projectId, "on-deploy"))?.when, 'event.payload.env == "prod"');
    const fh = (await getCr(h, "flowhandlers", NS, "on-deploy"))!;
    assert.equal(fh.status?.observedGeneration, fh.metadata.generation);

    await h.custom.patchNamespacedCustomObject(
      { ...cr("flowhandlers"), name: "on-deploy", body: { spec: { when: "event.payload.env ==" } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await waitFor(
      "InvalidSpec",
      async () => readyOf(await getCr(h, "flowhandlers", NS, "on-deploy"))?.reason === "InvalidSpec",
      10_000,
      20,
    );
    const bad = readyOf(await getCr(h, "flowhandlers", NS, "on-deploy"))!;
    assert.equal(bad.status, "False");
    assert.match(bad.message ?? "", /^when: /);
    assert.equal(
      (await getHandler(h.db.pool, p.projectId, "on-deploy"))?.when,
      'event.payload.env == "prod"',
      "the last good handler stays",
    );

    await h.custom.deleteNamespacedCustomObject({ ...cr("flowhandlers"), name: "on-deploy" });
    await waitFor("handler removed", async () => (await getHandler(h.db.pool, p.projectId, "on-deploy")) === undefined, 2000, 20);
  });

  test("text Postgres cannot store (NUL) in a spec: InvalidSpec naming the field, nothing written", async () => {
    await apply("flowhandlers", "FlowHandler", "nul-when", handlerSpec('event.type == "a\u0000b"'));
    await apply("flowsecrets", "FlowSecret", "nul-secret", {
      valueFrom: { secretKeyRef: { name: "nul", key: "k" } },
      secretName: "A\u0000B",
    });
    await apply("flowruns", "FlowRun", "nul-run", { kind: "script", source: "echo a\u0000b", filename: "n.sh", env: { A: "x" } });
    const reasonOf = async (plural: string, name: string) => (await getCr(h, plural, NS, name))?.status?.conditions?.[0];
    for (const [plural, name, field] of [
      ["flowhandlers", "nul-when", "spec.when"],
      ["flowsecrets", "nul-secret", "spec.secretName"],
      ["flowruns", "nul-run", "spec.source"],
    ] as const) {
      await waitFor(`${name} InvalidSpec`, async () => (await reasonOf(plural, name))?.reason === "InvalidSpec", 10_000, 20);
      assert.match((await reasonOf(plural, name))?.message ?? "", new RegExp(`^${field.replace(".", "\\.")} holds a NUL character`), name);
    }
    assert.equal((await getCr(h, "flowruns", NS, "nul-run"))?.status?.status, "invalid");
    const p = await project();
    assert.equal(await getHandler(h.db.pool, p.projectId, "nul-when"), undefined);
    for (const [plural, name] of [
      ["flowhandlers", "nul-when"],
      ["flowsecrets", "nul-secret"],
      ["flowruns", "nul-run"],
    ] as const)
      await h.custom.deleteNamespacedCustomObject({ ...cr(plural), name });
  });

  test("a FlowRun's env follows core's env rule: FLOW_*, LD_PRELOAD, PATH, NUL, surrogates, huge names are InvalidSpec, no run", async () => {
    const hostile = ["FLOW_TOKEN", "LD_PRELOAD", "LD_AUDIT", "BASH_ENV", "PATH", "A=B", "", "X".repeat(10_000)];
    const env = { OK: "1", ...Object.fromEntries(hostile.map((n): [string, string] => [n, "x"])) };
    const runs: Array<[name: string, env: Record<string, string>, want: RegExp[]]> = [
      [
        "env-reserved",
        env,
        [
          /spec\.env\.FLOW_TOKEN: env variable "FLOW_TOKEN" is refused: FLOW_\* variables are reserved/,
          /env\.LD_PRELOAD: env variable "LD_PRELOAD" is refused: the dynamic loader/,
          /env\.LD_AUDIT: env variable "LD_AUDIT" is refused/,
          /env\.BASH_ENV: env variable "BASH_ENV" is refused: a shell/,
          /env\.PATH: env variable "PATH" is refused/,
          /env\."A=B": env variable "A=B" is not an environment variable name/,
          /env\."": an env variable is empty/,
          /env\."X{64}\.\.\.": an env variable is at most 100 characters; this one has 10000/,
        ],
      ],
      ["env-nul", { "LD_\u0000PRELOAD": "x" }, [/^spec\.env\["LD_\\u0000PRELOAD"\] has a key that holds a NUL/]],
      ["env-surrogate", { "A\ud800": "x" }, [/^spec\.env\["A\\ud800"\] has a key that holds a lone UTF-16 surrogate/]],
    ];
    for (const [name, variables] of runs)
      await apply("flowruns", "FlowRun", name, { kind: "script", source: "env\n", filename: "env-rule.sh", env: variables });
    for (const [name, , want] of runs) {
      const condition = async () => (await getCr(h, "flowruns", NS, name))?.status?.conditions?.[0];
      await waitFor(`${name} InvalidSpec`, async () => (await condition())?.reason === "InvalidSpec", 10_000, 20);
      for (const w of want) assert.match((await condition())?.message ?? "", w, name);
    }
    const { rows } = await h.db.pool.query<{ n: string }>("select count(*) as n from runs where filename = 'env-rule.sh'");
    assert.equal(rows[0]?.n, "0", "no run was written");
    for (const [name] of runs) await h.custom.deleteNamespacedCustomObject({ ...cr("flowruns"), name });
  });

  test("two FlowSecrets naming one secret: the older holds it, the other is Ready=False NameTaken until the older goes", async () => {
    await h.core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: "dup-one" }, stringData: { k: "value-of-the-first" } },
    });
    await h.core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: "dup-two" }, stringData: { k: "value-of-the-second" } },
    });
    await apply("flowsecrets", "FlowSecret", "dup-token", { valueFrom: { secretKeyRef: { name: "dup-one", key: "k" } } });
    await readyIs("flowsecrets", "dup-token", (c) => c?.status === "True");
    await apply("flowsecrets", "FlowSecret", "dup-token-2", {
      secretName: "DUP_TOKEN",
      valueFrom: { secretKeyRef: { name: "dup-two", key: "k" } },
    });
    await readyIs("flowsecrets", "dup-token-2", (c) => c?.reason === "NameTaken");
    const taken = readyOf(await getCr(h, "flowsecrets", NS, "dup-token-2"))!;
    assert.equal(taken.status, "False");
    assert.match(taken.message ?? "", /DUP_TOKEN is FlowSecret dup-token's/);
    const s = await scope();
    assert.equal(await openSecretValue(h.db.pool, h.keyring, s, "DUP_TOKEN"), "value-of-the-first", "the holder's value stays");
    assert.equal(readyOf(await getCr(h, "flowsecrets", NS, "dup-token"))?.status, "True");
    // The holder goes: the secret stays, now the other's.
    await h.custom.deleteNamespacedCustomObject({ ...cr("flowsecrets"), name: "dup-token" });
    await readyIs("flowsecrets", "dup-token-2", (c) => c?.status === "True");
    await waitFor(
      "the second's value",
      async () => (await openSecretValue(h.db.pool, h.keyring, s, "DUP_TOKEN")) === "value-of-the-second",
      10_000,
      20,
    );
    await h.custom.deleteNamespacedCustomObject({ ...cr("flowsecrets"), name: "dup-token-2" });
    await waitFor(
      "removed with the last CR",
      async () => (await getSecretMeta(h.db.pool, s.projectId, "DUP_TOKEN")) === undefined,
      10_000,
      20,
    );
  });

  test("a FlowSecret from a secretKeyRef is sealed, re-sealed on rotation, and no CR ever holds the value", async () => {
    const value = "s3cr3t-" + "v".repeat(20);
    await apply("flowsecrets", "FlowSecret", "api-token", { valueFrom: { secretKeyRef: { name: "creds", key: "token" } } });
    await waitFor(
      "SecretNotFound",
      async () => readyOf(await getCr(h, "flowsecrets", NS, "api-token"))?.reason === "SecretNotFound",
      3000,
      20,
    );
    await h.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: "creds" }, stringData: { token: value } } });
    const s = await scope();
    await waitFor("sealed", async () => (await openSecretValue(h.db.pool, h.keyring, s, "API_TOKEN")) === value, 10_000, 20);
    await waitFor("Ready", async () => readyOf(await getCr(h, "flowsecrets", NS, "api-token"))?.status === "True", 10_000, 20);
    const setAt = (await getSecretMeta(h.db.pool, s.projectId, "API_TOKEN"))!.set_at;

    await h.core.replaceNamespacedSecret({
      name: "creds",
      namespace: NS,
      body: { metadata: { name: "creds" }, stringData: { token: "rotated-value-2" } },
    });
    await waitFor("re-sealed", async () => (await openSecretValue(h.db.pool, h.keyring, s, "API_TOKEN")) === "rotated-value-2", 10_000, 20);
    assert.notEqual((await getSecretMeta(h.db.pool, s.projectId, "API_TOKEN"))!.set_at, setAt);
    await waitFor(
      "status setAt follows",
      async () => (await getCr(h, "flowsecrets", NS, "api-token"))?.status?.setAt !== setAt,
      10_000,
      20,
    );

    const all = JSON.stringify(await h.custom.listNamespacedCustomObject(cr("flowsecrets")));
    assert.ok(!all.includes(value) && !all.includes("rotated-value-2"), "no value in a FlowSecret");
  });

  test("the Kubernetes ResourceStore writes the CR; a value for a Secret-fed FlowSecret is refused", async () => {
    const store = new KubeResourceStore(h.kc, h.pgStore);
    const s = await scope();
    const res = await store.putHandler(s, {
      name: "Nightly_Job",
      on: ["cron.*"],
      when: null,
      reaction: { kind: "script", source: "true\n", filename: "n.sh" },
      tags: [],
      credentials: {},
    });
    assert.equal(res.created, true);
    const fh = await getCr(h, "flowhandlers", NS, "nightly-job");
    assert.equal(fh?.metadata.annotations?.["flowsvc.io/name"], "Nightly_Job");
    await waitFor(
      "API handler Ready",
      async () => readyOf(await getCr(h, "flowhandlers", NS, "nightly-job"))?.status === "True",
      10_000,
      20,
    );
    await store.putSecret(s, "DB_PASS", "pw-from-api-123");
    await waitFor("setAt shown", async () => typeof (await getCr(h, "flowsecrets", NS, "db-pass"))?.status?.setAt === "string", 10_000, 20);
    assert.ok(!JSON.stringify(await getCr(h, "flowsecrets", NS, "db-pass")).includes("pw-from-api-123"));
    await assert.rejects(store.putSecret(s, "API_TOKEN", "x-value-xyz"), /comes from Secret team-a\/creds key token/);
    assert.equal(await store.deleteHandler(s, "Nightly_Job"), true);
    assert.equal(await getCr(h, "flowhandlers", NS, "nightly-job"), undefined);
  });

  test("a FlowCredential from Secrets: sealed, re-sealed on rotation, Ready=False saying what is wrong, never a value in a CR", async () => {
    const s = await scope();
    const key = BILLING_KEY;
    await apply("flowcredentials", "FlowCredential", "billing", {
      kind: "basic",
      usernameFrom: { secretKeyRef: { name: "billing", key: "user" } },
      valueFrom: { secretKeyRef: { name: "billing", key: "password" } },
    });
    await readyIs("flowcredentials", "billing", (c) => c?.reason === "SecretNotFound");
    assert.equal(
      readyOf(await getCr(h, "flowcredentials", NS, "billing"))?.message,
      `valueFrom: Secret ${NS}/billing not found (key password): the value is withdrawn until it is back`,
    );
    await h.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: "billing" }, stringData: { password: key } } });
    await readyIs(
      "flowcredentials",
      "billing",
      (c) =>
        c?.reason === "KeyNotFound" &&
        c.message === `usernameFrom: Secret ${NS}/billing has no key user: the value is withdrawn until it is back`,
    );
    await h.core.replaceNamespacedSecret({
      name: "billing",
      namespace: NS,
      body: { metadata: { name: "billing" }, stringData: { password: key, user: "ops" } },
    });
    await readyIs("flowcredentials", "billing", (c) => c?.status === "True");
    assert.deepEqual(await openCredentialValue(h.db.pool, h.keyring, s, "billing"), { kind: "basic", username: "ops", password: key });
    const setAt = (await getCr(h, "flowcredentials", NS, "billing"))?.status?.setAt;
    assert.equal(setAt, (await listCredentials(h.db.pool, s.projectId)).find((c) => c.name === "billing")?.set_at);

    // Rotation reaches Postgres; a value that breaks a credential rule is refused by field, never quoted.
    await h.core.replaceNamespacedSecret({
      name: "billing",
      namespace: NS,
      body: { metadata: { name: "billing" }, stringData: { password: "rotated-pw-9", user: "ops" } },
    });
    await waitFor(
      "re-sealed",
      async () =>
        (await openCredentialValue(h.db.pool, h.keyring, s, "billing"))?.kind === "basic" &&
        JSON.stringify(await openCredentialValue(h.db.pool, h.keyring, s, "billing")).includes("rotated-pw-9"),
      10_000,
      20,
    );
    await h.core.replaceNamespacedSecret({
      name: "billing",
      namespace: NS,
      body: { metadata: { name: "billing" }, stringData: { password: "bad\r\nX-Injected: leak-me", user: "ops" } },
    });
    await readyIs("flowcredentials", "billing", (c) => c?.reason === "InvalidValue");
    const invalid = readyOf(await getCr(h, "flowcredentials", NS, "billing"))!;
    assert.match(
      invalid.message ?? "",
      new RegExp(`^Secret ${NS}/billing key password .*: credential billing: password: it holds a control character`),
    );
    assert.ok(!(invalid.message ?? "").includes("leak-me"));
    assert.match(
      JSON.stringify(await openCredentialValue(h.db.pool, h.keyring, s, "billing")),
      /rotated-pw-9/,
      "the last good value stays",
    );

    // A name a connected account holds: NameTaken, and the account keeps it.
    await withTransaction(h.db.pool, (tx) => claimConnectionName(tx, s.projectId, "slack", "account"));
    await h.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: "slack" }, stringData: { token: "xoxb-not-sealed" } } });
    await apply("flowcredentials", "FlowCredential", "slack", {
      kind: "bearer",
      valueFrom: { secretKeyRef: { name: "slack", key: "token" } },
    });
    await readyIs("flowcredentials", "slack", (c) => c?.reason === "NameTaken");
    assert.match(readyOf(await getCr(h, "flowcredentials", NS, "slack"))?.message ?? "", /already taken by a connected account/);
    assert.equal(await openCredentialValue(h.db.pool, h.keyring, s, "slack"), undefined);
  });

  test("a credential set through the API: its FlowCredential says the kind only; a Secret-fed one refuses a value; no value in kubectl's YAML", async () => {
    const s = await scope();
    // Set through the API: the CR says the kind only; a Secret-fed one refuses a value; delete removes both.
    const store = new KubeResourceStore(h.kc, h.pgStore);
    await store.putCredential(s, "Deploy_Key", { kind: "api_key", header: "X-Deploy-Header", value: "api-set-value-77" });
    const api = (await getCr(h, "flowcredentials", NS, "deploy-key"))!;
    assert.deepEqual(api.spec, { kind: "api-key" });
    assert.equal(api.metadata.annotations?.["flowsvc.io/name"], "Deploy_Key");
    await readyIs("flowcredentials", "deploy-key", (c) => c?.status === "True");
    await assert.rejects(
      store.putCredential(s, "billing", { kind: "bearer", token: "x-value-xyz" }),
      (e: unknown) => e instanceof Error && /credential billing comes from Secret team-a\/billing key password/.test(e.message),
    );
    const yaml = await kubectlYaml("flowcredentials");
    for (const v of [BILLING_KEY, "rotated-pw-9", "leak-me", "xoxb-not-sealed", "api-set-value-77", "X-Deploy-Header", "ops"])
      assert.ok(!yaml.includes(v), `kubectl get -o yaml shows no value (${v.slice(0, 4)}...)`);
    // kubectl edits the kind away from the value's: KindMismatch; a FlowCredential with no value yet: ValueNotSet.
    await h.custom.patchNamespacedCustomObject(
      { ...cr("flowcredentials"), name: "deploy-key", body: { spec: { kind: "bearer" } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await readyIs("flowcredentials", "deploy-key", (c) => c?.reason === "KindMismatch");
    assert.equal(
      readyOf(await getCr(h, "flowcredentials", NS, "deploy-key"))?.message,
      "the value set through the API is of kind api-key; spec.kind says bearer",
    );
    await apply("flowcredentials", "FlowCredential", "later", { kind: "url-token" });
    await readyIs("flowcredentials", "later", (c) => c?.reason === "ValueNotSet");
    assert.match(readyOf(await getCr(h, "flowcredentials", NS, "later"))?.message ?? "", /flow credential set later --kind url-token/);
    assert.equal(await store.deleteCredential(s, "Deploy_Key"), true);
    assert.equal(await getCr(h, "flowcredentials", NS, "deploy-key"), undefined);
    assert.equal(await openCredentialValue(h.db.pool, h.keyring, s, "Deploy_Key"), undefined);
    await h.custom.deleteNamespacedCustomObject({ ...cr("flowcredentials"), name: "billing" });
    await waitFor(
      "removed with its CR",
      async () => (await openCredentialValue(h.db.pool, h.keyring, s, "billing")) === undefined,
      2000,
      20,
    );
  });

  test("a FlowGraph is a stored graph with its endpoints; a document that breaks a rule is Ready=False with every path; delete removes it", async () => {
    const s = await scope();
    const doc = {
      version: "flowsvc-graph/v1",
      nodes: [
        { id: "start", type: "trigger" },
        { id: "fetch", type: "http", config: { method: "GET", url: "https://api.example.com/items" } },
      ],
      edges: [{ from: "start", to: "fetch" }],
    };
    await apply("flowgraphs", "FlowGraph", "nightly", doc);
    await readyIs("flowgraphs", "nightly", (c) => c?.status !== undefined);
    assert.equal(
      readyOf(await getCr(h, "flowgraphs", NS, "nightly"))?.status,
      "True",
      readyOf(await getCr(h, "flowgraphs", NS, "nightly"))?.message,
    );
    const stored = await getStoredGraph(h.db.pool, s.projectId, "nightly");
    assert.deepEqual(
      stored?.document.nodes.map((n) => n.id),
      ["start", "fetch"],
    );
    assert.equal(stored?.createdBy, null, "made by the controller, not a person");
    assert.deepEqual(
      (await listGraphEndpoints(h.db.pool, s.projectId, "nightly")).map((e) => [e.node_id, e.event_type]),
      [["start", "graph.nightly.start.delivery"]],
    );

    await h.custom.patchNamespacedCustomObject(
      {
        ...cr("flowgraphs"),
        name: "nightly",
        body: { spec: { edges: [{ from: "start", to: "nowhere" }], nodes: [{ id: "start", type: "trigger" }] } },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await readyIs("flowgraphs", "nightly", (c) => c?.reason === "InvalidSpec");
    assert.match(readyOf(await getCr(h, "flowgraphs", NS, "nightly"))?.message ?? "", /^spec\.edges\[0\]\.to: .*nowhere/);
    assert.equal((await getStoredGraph(h.db.pool, s.projectId, "nightly"))?.document.nodes.length, 2, "the last good graph stays");

    await apply("flowgraphs", "FlowGraph", "has.dot", doc);
    await readyIs("flowgraphs", "has.dot", (c) => c?.reason === "InvalidSpec");
    assert.match(readyOf(await getCr(h, "flowgraphs", NS, "has.dot"))?.message ?? "", /graph name "has.dot" is not allowed/);

    await h.custom.deleteNamespacedCustomObject({ ...cr("flowgraphs"), name: "nightly" });
    await waitFor("graph removed", async () => (await getStoredGraph(h.db.pool, s.projectId, "nightly")) === undefined, 2000, 20);
  });

  test("a graph set through the API writes its FlowGraph too (issue 16): the reconcile finds Postgres the same; rm removes both", async () => {
    const s = await scope();
    const store = new KubeResourceStore(h.kc, h.pgStore);
    const sent = {
      version: "flowsvc-graph/v1",
      nodes: [
        { id: "hook", type: "webhook", config: {} },
        { id: "call", type: "http", config: { url: "https://api.example.com/x" } },
      ],
      edges: [{ from: "hook", to: "call" }],
    };
    const parsed = parseGraph(sent);
    assert.ok(parsed.ok);
    const res = await store.putGraph(s, { name: "apigraph", document: parsed.graph, sent, userId: null });
    assert.equal(res.created, true);
    const secret = res.endpoints.find((e) => e.node_id === "hook")?.secret;
    assert.ok(secret, "the new endpoint's secret is answered once");
    assert.deepEqual((await getCr(h, "flowgraphs", NS, "apigraph"))?.spec, sent);
    await readyIs("flowgraphs", "apigraph", (c) => c?.status === "True");
    assert.deepEqual(
      (await getStoredGraph(h.db.pool, s.projectId, "apigraph"))?.document.nodes.map((n) => n.id),
      ["hook", "call"],
    );
    // A replace patches the CR's whole spec (edges gone); the endpoint that stays keeps its secret.
    const smaller = { version: "flowsvc-graph/v1", nodes: [sent.nodes[0]], edges: [] };
    const again = parseGraph(smaller);
    assert.ok(again.ok);
    const replaced = await store.putGraph(s, { name: "apigraph", document: again.graph, sent: smaller, userId: null });
    assert.deepEqual([replaced.created, replaced.endpoints.map((e) => [e.node_id, e.secret])], [false, [["hook", undefined]]]);
    assert.deepEqual((await getCr(h, "flowgraphs", NS, "apigraph"))?.spec, smaller);
    assert.equal(await store.deleteGraph(s, "apigraph"), true);
    assert.equal(await getCr(h, "flowgraphs", NS, "apigraph"), undefined);
    assert.equal(await getStoredGraph(h.db.pool, s.projectId, "apigraph"), undefined);
  });

  test("a handler deleted while the controller was down is removed on start (list diff)", async () => {
    await apply("flowhandlers", "FlowHandler", "short-lived", handlerSpec());
    const p = await project();
    await waitFor("in Postgres", async () => (await getHandler(h.db.pool, p.projectId, "short-lived")) !== undefined, 10_000, 20);
    await h.stopReconcilers();
    await h.custom.deleteNamespacedCustomObject({ ...cr("flowhandlers"), name: "short-lived" });
    assert.ok(await getHandler(h.db.pool, p.projectId, "short-lived"), "still there while the controller is down");
    await h.restart();
    await waitFor("removed on start", async () => (await getHandler(h.db.pool, p.projectId, "short-lived")) === undefined, 15_000, 20);
  });

  test("a run gets a small FlowRun that follows it through a dropped watch and a 410, then goes after its TTL", async () => {
    const p = await project();
    const runId = await scriptRun(h, p.projectId);
    await waitFor("FlowRun queued", async () => (await getCr(h, "flowruns", NS, runId))?.status?.status === "queued", 15_000, 20);
    const owner = await h.reconcilers.runOwners.ownerOf(runId);
    assert.equal(owner.name, runId);
    assert.equal(owner.namespace, NS);
    const lists = h.reconcilers.lists();
    h.api.dropWatches();
    h.api.compact();
    const writes = flowRunWrites(h, runId);
    await withTransaction(h.db.pool, async (tx) => {
      await appendLogs(tx, runId, null, [{ stream: "stdout", data: "x".repeat(512 * 1024) + "\nlast line\n" }]);
      await finishRun(tx, runId, { status: "succeeded", output: null, error: null });
    });
    await waitFor("FlowRun succeeded", () => endedWrite(writes.seen, "succeeded") !== undefined, 15_000, 20);
    writes.stop();
    const fr = endedWrite(writes.seen, "succeeded")!;
    assert.ok(Buffer.byteLength(JSON.stringify(fr)) < 4096, `FlowRun is ${Buffer.byteLength(JSON.stringify(fr))} bytes`);
    assert.match(fr.status?.summary ?? "", /last line$/);
    assert.equal(fr.status?.conditions?.[0]?.status, "True");
    await waitFor("relisted after the 410", () => h.reconcilers.lists() > lists, 15_000, 20);
    await waitFor("FlowRun gone after its TTL", async () => (await getCr(h, "flowruns", NS, runId)) === undefined, 15_000, 50);
    const { rows } = await h.db.pool.query<{ status: string }>(`select status from runs where id = $1`, [runId]);
    assert.equal(rows[0]?.status, "succeeded", "the run stays in Postgres");
  });

  test("a FlowRun's substate goes when its run is no longer parked (a merge patch keeps a key it leaves out)", async () => {
    const p = await project();
    const runId = await scriptRun(h, p.projectId);
    const status = async () => (await getCr(h, "flowruns", NS, runId))?.status;
    await waitFor("FlowRun queued", async () => (await status())?.status === "queued", 15_000, 20);
    await h.db.pool.query(`update runs set status = 'parked', substate = '{"name": "timer", "kind": "sleep"}' where id = $1`, [runId]);
    await waitFor("FlowRun parked on sleep:timer", async () => (await status())?.substate === "sleep:timer", 15_000, 20);
    await withTransaction(h.db.pool, (tx) => finishRun(tx, runId, { status: "succeeded", output: null, error: null }));
    await waitFor("FlowRun succeeded", async () => (await status())?.status === "succeeded", 15_000, 20);
    assert.equal((await status())?.substate, undefined, "a finished run has no substate (flow status shows -)");
  });

  test("an applied FlowRun is submitted once, with its uid as idempotency key and its credentials; a bad spec is Succeeded=False, status invalid", async () => {
    const p = await project();
    const spec = { kind: "script", source: "echo applied\n", filename: "a.sh", credentials: { GH_TOKEN: "github" } };
    const made = (await apply("flowruns", "FlowRun", "applied-run", spec)) as Cr;
    const uid = made.metadata.uid;
    const runs = async () =>
      (
        await h.db.pool.query<{ id: string; credentials: unknown; trusted: boolean }>(
          `select id, credentials, trusted from runs where project_id = $1 and idempotency_key = $2`,
          [p.projectId, uid],
        )
      ).rows;
    await waitFor("the applied FlowRun submitted", async () => (await runs()).length === 1, 15_000, 20);
    const [run] = await runs();
    assert.deepEqual(run!.credentials, { GH_TOKEN: "github" }, "the declared credentials (names only) reach the run");
    assert.equal(run!.trusted, true, "a FlowRun applied by a person is trusted, as a submit is");
    const manual = await h.db.pool.query(`select 1 from events where project_id = $1 and type = 'manual' and payload->>'run_id' = $2`, [
      p.projectId,
      run!.id,
    ]);
    assert.equal(manual.rowCount, 1, "one manual event on the bus");
    // A change that makes the object reconcile again never submits a second run.
    await h.custom.patchNamespacedCustomObject(
      { ...cr("flowruns"), name: "applied-run", body: { metadata: { labels: { touched: "yes" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await waitFor(
      "the FlowRun's status names its run",
      async () => (await getCr(h, "flowruns", NS, "applied-run"))?.status?.runId === run!.id,
      15_000,
      20,
    );
    assert.equal((await runs()).length, 1);

    await apply("flowruns", "FlowRun", "bad-run", { kind: "script", source: "x", filename: "b.sh", credentials: { LD_PRELOAD: "x" } });
    await waitFor(
      "the bad FlowRun refused in its status",
      async () => (await getCr(h, "flowruns", NS, "bad-run"))?.status?.conditions?.[0]?.reason === "InvalidSpec",
      15_000,
      20,
    );
    const bad = (await getCr(h, "flowruns", NS, "bad-run"))!.status!.conditions![0]!;
    assert.equal(bad.status, "False");
    assert.match(bad.message ?? "", /LD_PRELOAD/);
    // `kubectl get flowruns` says so in its STATUS column (not blank), as the CRD's printer columns have it.
    const table = (await promisify(execFile)("kubectl", ["--kubeconfig", h.api.kubeconfigPath, "get", "flowruns", "bad-run", "-n", NS]))
      .stdout;
    const [head, row] = table
      .trim()
      .split("\n")
      .map((l) => l.trim().split(/\s{2,}/));
    assert.deepEqual(
      [head?.slice(0, 2), row?.slice(0, 2)],
      [
        ["NAME", "STATUS"],
        ["bad-run", "invalid"],
      ],
      table,
    );
    const refused = await h.db.pool.query(`select 1 from runs where project_id = $1 and filename = 'b.sh'`, [p.projectId]);
    assert.equal(refused.rowCount, 0, "a refused FlowRun writes no run");
  });
});

describe("the FlowRun mirror with runTtlSecondsAfterFinished: 0", () => {
  let h0: Harness;
  before(async () => {
    h0 = await startHarness({ namespaces: [{ name: "team-z", org: "zeta" }], ttlSeconds: 0 });
  });
  after(() => h0.close());

  test("a finished run's FlowRun shows its end, then goes at once (the pass lists runs that ended since the last one, not only within the TTL)", async () => {
    // The namespace's project, as the controller makes it on first need.
    const p = await ensureProject(h0.db.pool, { org: "zeta", project: "team-z" }, (orgId) => h0.keyring.newWrappedOrgKey(orgId));
    const runId = await scriptRun(h0, p.projectId);
    const writes = flowRunWrites(h0, runId);
    await waitFor("FlowRun queued", async () => (await getCr(h0, "flowruns", "team-z", runId))?.status?.status === "queued", 15_000, 20);
    await withTransaction(h0.db.pool, (tx) => finishRun(tx, runId, { status: "succeeded", output: null, error: null }));
    await waitFor("FlowRun deleted", () => writes.seen.some((w) => w.type === "DELETED"), 15_000, 20);
    writes.stop();
    const order = writes.seen.map((w) => `${w.type} ${w.fr.status?.status ?? "-"}`);
    const ended = order.indexOf("MODIFIED succeeded");
    assert.ok(
      ended >= 0 && ended < order.findIndex((w) => w.startsWith("DELETED")),
      `its end was written before it went: ${order.join(", ")}`,
    );
    assert.equal(await getCr(h0, "flowruns", "team-z", runId), undefined);
  });
});
