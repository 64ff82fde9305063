// The fake API server driven by the real @kubernetes/client-node (2.x, with undici pinned to ^7 so
// that it loads on Node 20): CRUD, optimistic concurrency, the status subresource, finalizers,
// ownerReference garbage collection, selectors, patches and Leases.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1Pod,
} from "@kubernetes/client-node";
import { waitFor } from "../support/wait.js";
import { GROUP, PLURAL, VERSION, refusal, widgetCrd } from "./fixtures.js";
import { startFakeApiServer, type FakeApiServer } from "./server.js";

type Widget = KubernetesObject & { spec?: Record<string, unknown>; status?: Record<string, unknown> };

let api: FakeApiServer;
let core: CoreV1Api;
let custom: CustomObjectsApi;

const widget = (name: string, extra: Partial<Widget> = {}): Widget => ({
  apiVersion: `${GROUP}/${VERSION}`,
  kind: "Widget",
  metadata: { name },
  spec: { size: 1 },
  ...extra,
});
const cr = { group: GROUP, version: VERSION, plural: PLURAL, namespace: "default" };
const pod = (name: string): V1Pod => ({ metadata: { name }, spec: { containers: [{ name: "main", image: "agent", command: ["true"] }] } });

before(async () => {
  api = await startFakeApiServer();
  const kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  core = kc.makeApiClient(CoreV1Api);
  custom = kc.makeApiClient(CustomObjectsApi);
  // CustomObjectsApi, not the typed ApiextensionsV1Api/KubernetesObjectApi: those drop default and enum
  await custom.createClusterCustomObject({
    group: "apiextensions.k8s.io",
    version: "v1",
    plural: "customresourcedefinitions",
    body: widgetCrd(),
  });
});
after(() => api.close());

describe("client-node against the fake API server", () => {
  test("the client loads on this Node and lists the built-in namespaces over TLS with its bearer token", async () => {
    assert.match(process.versions.node, /^\d+\./);
    const list = await core.listNamespace();
    assert.deepEqual(list.items.map((n) => n.metadata?.name).sort(), ["default", "kube-system"]);
    assert.ok(Number(list.metadata?.resourceVersion) > 0);
  });

  test("a request without the bearer token is refused with 401", async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfigPath);
    kc.users[0] = { name: "fake", token: "wrong" };
    const { code, status } = await refusal(kc.makeApiClient(CoreV1Api).listNamespace());
    assert.equal(code, 401);
    assert.equal(status.reason ?? "Unauthorized", "Unauthorized");
  });

  test("create, read, replace, delete; AlreadyExists, NotFound and a stale update's 409 Conflict in the Status shape", async () => {
    const created = await core.createNamespacedSecret({
      namespace: "default",
      body: { metadata: { name: "s1" }, stringData: { token: "abc" } },
    });
    assert.equal(created.data?.token, Buffer.from("abc").toString("base64"));
    assert.equal((created as { stringData?: unknown }).stringData, undefined);
    const dup = await refusal(core.createNamespacedSecret({ namespace: "default", body: { metadata: { name: "s1" } } }));
    assert.equal(dup.code, 409);
    assert.equal(dup.status.reason, "AlreadyExists");
    assert.equal(dup.status.message, 'secrets "s1" already exists');

    const fresh = await core.replaceNamespacedSecret({
      name: "s1",
      namespace: "default",
      body: { ...created, data: { token: Buffer.from("v2").toString("base64") } },
    });
    assert.ok(Number(fresh.metadata?.resourceVersion) > Number(created.metadata?.resourceVersion));
    const stale = await refusal(core.replaceNamespacedSecret({ name: "s1", namespace: "default", body: { ...created, data: {} } }));
    assert.equal(stale.code, 409);
    assert.equal(stale.status.reason, "Conflict");
    assert.match(stale.status.message ?? "", /the object has been modified/);
    const read = await core.readNamespacedSecret({ name: "s1", namespace: "default" });
    assert.equal(read.data?.token, Buffer.from("v2").toString("base64"));

    await core.deleteNamespacedSecret({ name: "s1", namespace: "default" });
    const gone = await refusal(core.readNamespacedSecret({ name: "s1", namespace: "default" }));
    assert.equal(gone.code, 404);
    assert.equal(gone.status.kind, "Status");
    assert.equal(gone.status.reason, "NotFound");
    assert.equal(gone.status.message, 'secrets "s1" not found');
  });

  test("hostile names and bodies are refused, nothing is written", async () => {
    const before = api.storage.resourceVersion;
    for (const name of ["bad\u0000name", "UPPER", "a/b", "\ud800", "x".repeat(300), "-lead"]) {
      const r = await refusal(core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name } } }));
      assert.ok([400, 404, 422].includes(r.code), `${JSON.stringify(name)}: ${r.code}`);
    }
    const noNs = await refusal(core.createNamespacedConfigMap({ namespace: "nowhere", body: { metadata: { name: "c" } } }));
    assert.equal(noNs.code, 404);
    assert.equal(noNs.status.message, 'namespaces "nowhere" not found');
    const badB64 = await refusal(
      core.createNamespacedSecret({ namespace: "default", body: { metadata: { name: "b" }, data: { k: "%%%" } } }),
    );
    assert.equal(badB64.code, 400);
    const badSelector = await refusal(core.listNamespacedSecret({ namespace: "default", labelSelector: "a in (x" }));
    assert.equal(badSelector.code, 400);
    const badField = await refusal(core.listNamespacedSecret({ namespace: "default", fieldSelector: "spec.secretThing=1" }));
    assert.equal(badField.code, 400);
    assert.match(badField.status.message ?? "", /field label not supported: spec.secretThing/);
    const huge = await refusal(
      core.createNamespacedSecret({
        namespace: "default",
        body: { metadata: { name: "huge" }, stringData: { k: "x".repeat(4 * 1024 * 1024) } },
      }),
    );
    assert.equal(huge.code, 413);
    assert.equal(api.storage.resourceVersion, before);
  });

  test("label selectors (=, !=, in, notin, exists, !exists) and field selectors pick the documented objects", async () => {
    const labels: Record<string, Record<string, string>> = {
      c1: { app: "a", tier: "web" },
      c2: { app: "b", tier: "db" },
      c3: { app: "c" },
    };
    for (const [name, l] of Object.entries(labels))
      await core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name, labels: l } } });
    const pick = async (labelSelector?: string, fieldSelector?: string): Promise<string[]> =>
      (await core.listNamespacedConfigMap({ namespace: "default", labelSelector, fieldSelector })).items
        .map((c) => c.metadata!.name!)
        .filter((n) => n in labels);
    assert.deepEqual(await pick("app=a"), ["c1"]);
    assert.deepEqual(await pick("app!=a"), ["c2", "c3"]);
    assert.deepEqual(await pick("app in (a,b)"), ["c1", "c2"]);
    assert.deepEqual(await pick("app notin (a,b)"), ["c3"]);
    assert.deepEqual(await pick("tier"), ["c1", "c2"]);
    assert.deepEqual(await pick("!tier"), ["c3"]);
    assert.deepEqual(await pick("app in (a,b),tier=db"), ["c2"]);
    assert.deepEqual(await pick(undefined, "metadata.name=c3"), ["c3"]);
    assert.deepEqual(await pick(undefined, "metadata.name!=c3,metadata.namespace=default"), ["c1", "c2"]);
  });

  test("merge, JSON and strategic merge patches; a strategic merge patch on a custom resource is 415", async () => {
    await custom.createNamespacedCustomObject({ ...cr, body: widget("p1", { spec: { size: 1, color: "red" } }) });
    const merged = (await custom.patchNamespacedCustomObject(
      { ...cr, name: "p1", body: { spec: { color: null, size: 5 } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    )) as Widget;
    assert.deepEqual(merged.spec, { size: 5, color: "blue" }, "color removed by the merge patch comes back as the schema default");
    const jp = (await custom.patchNamespacedCustomObject(
      { ...cr, name: "p1", body: [{ op: "replace", path: "/spec/size", value: 6 }] },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
    )) as Widget;
    assert.equal(jp.spec?.size, 6);
    const failedTest = await refusal(
      custom.patchNamespacedCustomObject(
        { ...cr, name: "p1", body: [{ op: "test", path: "/spec/size", value: 1 }] },
        setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
      ),
    );
    assert.equal(failedTest.code, 422);
    const smp = await refusal(
      custom.patchNamespacedCustomObject(
        { ...cr, name: "p1", body: { spec: { size: 7 } } },
        setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
      ),
    );
    assert.equal(smp.code, 415);

    await core.createNamespacedPod({
      namespace: "default",
      body: { ...pod("smp"), spec: { containers: [{ name: "main", image: "v1", env: [{ name: "A", value: "1" }] }] } },
    });
    const patched = await core.patchNamespacedPod(
      { name: "smp", namespace: "default", body: { spec: { containers: [{ name: "main", image: "v2" }] } } },
      setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
    );
    assert.equal(patched.spec?.containers[0]?.image, "v2");
    assert.deepEqual(
      JSON.parse(JSON.stringify(patched.spec?.containers[0]?.env)),
      [{ name: "A", value: "1" }],
      "containers merge by name: env kept",
    );
    const immutable = await refusal(
      core.patchNamespacedPod(
        { name: "smp", namespace: "default", body: { spec: { restartPolicy: "Never" } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
    assert.equal(immutable.code, 422);
    assert.equal(immutable.status.reason, "Invalid");
  });

  test("status subresource: spec changes bump generation, status writes do not, and each ignores the other's half", async () => {
    const created = (await custom.createNamespacedCustomObject({ ...cr, body: widget("g1", { status: { phase: "Smuggled" } }) })) as Widget;
    assert.equal(created.metadata?.generation, 1);
    assert.equal(created.status, undefined, "status on create is dropped");
    const spec2 = (await custom.patchNamespacedCustomObject(
      { ...cr, name: "g1", body: { spec: { size: 2 }, status: { phase: "Ignored" } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    )) as Widget;
    assert.equal(spec2.metadata?.generation, 2);
    assert.equal(spec2.status, undefined, "the main resource does not write status");
    const status = (await custom.patchNamespacedCustomObjectStatus(
      { ...cr, name: "g1", body: { spec: { size: 99 }, status: { phase: "Ready", observedGeneration: 2, unknownField: "pruned" } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    )) as Widget;
    assert.equal(status.metadata?.generation, 2, "a status write does not bump generation");
    assert.equal(status.spec?.size, 2, "the status subresource does not write spec");
    assert.deepEqual(status.status, { phase: "Ready", observedGeneration: 2 }, "fields the schema does not declare are pruned");
    const noop = (await custom.patchNamespacedCustomObjectStatus(
      { ...cr, name: "g1", body: { status: { phase: "Ready" } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    )) as Widget;
    assert.equal(
      noop.metadata?.resourceVersion,
      status.metadata?.resourceVersion,
      "a write that changes nothing keeps the resourceVersion",
    );
    const invalid = await refusal(
      custom.patchNamespacedCustomObject(
        { ...cr, name: "g1", body: { spec: { size: -1, color: "green" } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
    assert.equal(invalid.code, 422);
    assert.match(invalid.status.message ?? "", /spec.size: Invalid value: -1/);
    assert.match(invalid.status.message ?? "", /spec.color: Unsupported value: "green"/);
  });

  test("finalizers: delete sets deletionTimestamp and keeps the object; removing the last finalizer deletes it", async () => {
    await custom.createNamespacedCustomObject({
      ...cr,
      body: widget("f1", { metadata: { name: "f1", finalizers: ["demo.flowsvc.io/cleanup"] } }),
    });
    const deleting = (await custom.deleteNamespacedCustomObject({ ...cr, name: "f1" })) as Widget;
    assert.ok(deleting.metadata?.deletionTimestamp);
    const still = (await custom.getNamespacedCustomObject({ ...cr, name: "f1" })) as Widget;
    assert.deepEqual(still.metadata?.finalizers, ["demo.flowsvc.io/cleanup"]);
    const more = await refusal(
      custom.patchNamespacedCustomObject(
        { ...cr, name: "f1", body: { metadata: { finalizers: ["demo.flowsvc.io/cleanup", "x/y"] } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
    assert.equal(more.code, 422, "no new finalizer on an object being deleted");
    await custom.patchNamespacedCustomObject(
      { ...cr, name: "f1", body: [{ op: "remove", path: "/metadata/finalizers" }] },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
    );
    assert.equal((await refusal(custom.getNamespacedCustomObject({ ...cr, name: "f1" }))).code, 404);
  });

  test("ownerReference garbage collection: deleting an owner deletes its dependents in the background; Orphan keeps them", async () => {
    const owner = (await custom.createNamespacedCustomObject({ ...cr, body: widget("owner") })) as Widget;
    const ref = {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: "Widget",
      name: "owner",
      uid: owner.metadata!.uid!,
      controller: true,
      blockOwnerDeletion: true,
    };
    const p = await core.createNamespacedPod({
      namespace: "default",
      body: { ...pod("owned"), metadata: { name: "owned", ownerReferences: [ref] } },
    });
    const podRef = { apiVersion: "v1", kind: "Pod", name: "owned", uid: p.metadata!.uid! };
    await core.createNamespacedSecret({ namespace: "default", body: { metadata: { name: "owned-token", ownerReferences: [podRef] } } });
    await custom.deleteNamespacedCustomObject({ ...cr, name: "owner" });
    await waitFor(
      "the owned pod and its secret to be collected",
      async () => {
        const pods = await core.listNamespacedPod({ namespace: "default", fieldSelector: "metadata.name=owned" });
        const secrets = await core.listNamespacedSecret({ namespace: "default", fieldSelector: "metadata.name=owned-token" });
        return pods.items.length === 0 && secrets.items.length === 0;
      },
      10_000,
    );

    const owner2 = (await custom.createNamespacedCustomObject({ ...cr, body: widget("owner2") })) as Widget;
    await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "kept", ownerReferences: [{ ...ref, name: "owner2", uid: owner2.metadata!.uid! }] } },
    });
    await custom.deleteNamespacedCustomObject({ ...cr, name: "owner2", propagationPolicy: "Orphan" });
    const kept = await core.readNamespacedConfigMap({ name: "kept", namespace: "default" });
    assert.deepEqual(kept.metadata?.ownerReferences ?? [], []);

    const dangling = await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "dangling", ownerReferences: [{ ...ref, uid: "00000000-0000-0000-0000-000000000000" }] } },
    });
    assert.ok(dangling.metadata?.uid);
    await waitFor(
      "an object whose only owner never existed to be collected",
      async () =>
        (await core.listNamespacedConfigMap({ namespace: "default", fieldSelector: "metadata.name=dangling" })).items.length === 0,
      10_000,
    );
  });

  test("a Lease is created once and renewed by its holder; a second replica's stale renewal gets 409", async () => {
    const coord = (() => {
      const kc = new KubeConfig();
      kc.loadFromFile(api.kubeconfigPath);
      return kc.makeApiClient(CoordinationV1Api);
    })();
    const spec = { holderIdentity: "a", leaseDurationSeconds: 15, acquireTime: new Date(), renewTime: new Date() };
    const lease = await coord.createNamespacedLease({ namespace: "default", body: { metadata: { name: "controller" }, spec } });
    const taken = await refusal(
      coord.createNamespacedLease({
        namespace: "default",
        body: { metadata: { name: "controller" }, spec: { ...spec, holderIdentity: "b" } },
      }),
    );
    assert.equal(taken.code, 409);
    assert.equal(taken.status.reason, "AlreadyExists");
    const seenByB = await coord.readNamespacedLease({ name: "controller", namespace: "default" });
    const renewed = await coord.replaceNamespacedLease({
      name: "controller",
      namespace: "default",
      body: { ...lease, spec: { ...spec, renewTime: new Date(Date.now() + 1000) } },
    });
    assert.equal(renewed.spec?.holderIdentity, "a");
    const steal = await refusal(
      coord.replaceNamespacedLease({
        name: "controller",
        namespace: "default",
        body: { ...seenByB, spec: { ...spec, holderIdentity: "b" } },
      }),
    );
    assert.equal(steal.code, 409);
    assert.equal(steal.status.reason, "Conflict");
    assert.equal((await coord.readNamespacedLease({ name: "controller", namespace: "default" })).spec?.holderIdentity, "a");
  });

  test("server-side apply (application/apply-patch+yaml) creates, then updates; it needs a fieldManager", async () => {
    const apply = setHeaderOptions("Content-Type", "application/apply-patch+yaml");
    const noManager = await refusal(custom.patchNamespacedCustomObject({ ...cr, name: "ssa", body: widget("ssa") }, apply));
    assert.equal(noManager.code, 400);
    const created = (await custom.patchNamespacedCustomObject(
      { ...cr, name: "ssa", body: widget("ssa"), fieldManager: "test" },
      apply,
    )) as Widget;
    assert.equal(created.spec?.size, 1);
    const updated = (await custom.patchNamespacedCustomObject(
      { ...cr, name: "ssa", body: { ...widget("ssa"), spec: { size: 4 } }, fieldManager: "test" },
      apply,
    )) as Widget;
    assert.equal(updated.spec?.size, 4);
    assert.equal(updated.metadata?.uid, created.metadata?.uid);
  });

  test("a deleted namespace is Terminating until its objects (and their finalizers) are gone, then goes", async () => {
    await core.createNamespace({ body: { metadata: { name: "doomed" } } });
    await custom.createNamespacedCustomObject({
      ...cr,
      namespace: "doomed",
      body: widget("held", { metadata: { name: "held", finalizers: ["demo.flowsvc.io/hold"] } }),
    });
    await core.createNamespacedSecret({ namespace: "doomed", body: { metadata: { name: "plain" } } });
    await core.deleteNamespace({ name: "doomed" });
    await waitFor(
      "Terminating, the secret gone",
      async () => {
        const ns = await core.readNamespace({ name: "doomed" });
        const secrets = await core.listNamespacedSecret({ namespace: "doomed" });
        return ns.status?.phase === "Terminating" && secrets.items.length === 0;
      },
      10_000,
    );
    const refused = await refusal(core.createNamespacedSecret({ namespace: "doomed", body: { metadata: { name: "late" } } }));
    assert.equal(refused.code, 403);
    await custom.patchNamespacedCustomObject(
      { ...cr, namespace: "doomed", name: "held", body: { metadata: { finalizers: null } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await waitFor(
      "the namespace to go",
      async () => (await core.listNamespace()).items.every((n) => n.metadata?.name !== "doomed"),
      10_000,
    );
  });
});
