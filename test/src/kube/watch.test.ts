// Watches on the fake API server through the real client-node: the informer (list, then watch from
// the list's resourceVersion) across dropped connections and a 410 Gone after compaction, and the
// raw watch protocol (replay from a resourceVersion, 410 in the Status shape, selectors, bookmarks).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  Watch,
  makeInformer,
  setHeaderOptions,
  type KubernetesListObject,
  type KubernetesObject,
} from "@kubernetes/client-node";
import { waitFor } from "../support/wait.js";
import { GROUP, PLURAL, VERSION, rawGet, widgetCrd } from "./fixtures.js";
import { startFakeApiServer, type FakeApiServer } from "./server.js";

let api: FakeApiServer;
let kc: KubeConfig;
let custom: CustomObjectsApi;
const cr = { group: GROUP, version: VERSION, plural: PLURAL, namespace: "default" };
const path = `/apis/${GROUP}/${VERSION}/namespaces/default/${PLURAL}`;
const widget = (name: string, labels: Record<string, string> = {}) => ({
  apiVersion: `${GROUP}/${VERSION}`,
  kind: "Widget",
  metadata: { name, labels },
  spec: { size: 1 },
});
const jsonPatch = setHeaderOptions("Content-Type", PatchStrategy.JsonPatch);
const widgetType = () => api.registry.get(GROUP, VERSION, PLURAL)!;

before(async () => {
  api = await startFakeApiServer({ bookmarkIntervalMs: 100 });
  kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  custom = kc.makeApiClient(CustomObjectsApi);
  await custom.createClusterCustomObject({
    group: "apiextensions.k8s.io",
    version: "v1",
    plural: "customresourcedefinitions",
    body: widgetCrd(),
  });
});
after(() => api.close());

describe("watches against the fake API server", () => {
  test("the client-node informer sees adds, updates and deletes, survives dropped connections, and relists once after a 410 without missing anything", async () => {
    const list = () => custom.listNamespacedCustomObject(cr) as Promise<KubernetesListObject<KubernetesObject>>;
    const informer = makeInformer(kc, path, list);
    const seen: string[] = [];
    informer.on("add", (o) => seen.push(`add ${o.metadata!.name}`));
    informer.on("update", (o) => seen.push(`update ${o.metadata!.name}`));
    informer.on("delete", (o) => seen.push(`delete ${o.metadata!.name}`));
    informer.on("error", (err) => seen.push(`error ${String(err)}`));
    await custom.createNamespacedCustomObject({ ...cr, body: widget("before") });
    await informer.start();
    try {
      await waitFor("the initial list", () => seen.includes("add before"));
      await custom.createNamespacedCustomObject({ ...cr, body: widget("w1") });
      await custom.patchNamespacedCustomObject({ ...cr, name: "w1", body: [{ op: "replace", path: "/spec/size", value: 2 }] }, jsonPatch);
      await waitFor("add and update of w1", () => seen.includes("add w1") && seen.includes("update w1"));

      assert.ok(api.dropWatches() >= 1, "the informer's watch was open");
      await custom.createNamespacedCustomObject({ ...cr, body: widget("during-drop") });
      await waitFor("the change made while the watch was down", () => seen.includes("add during-drop"), 15_000);

      await waitFor("the informer to watch again", () => api.hub.openWatches >= 1, 15_000);
      // In one tick, before the informer can reconnect: drop its watch, change what it holds, forget the history.
      const lists = () => api.requests.filter((r) => r.method === "GET" && r.path.startsWith(path) && !r.path.includes("watch=")).length;
      const listsBefore = lists();
      api.dropWatches();
      api.storage.create({ type: widgetType(), namespace: "default" }, widget("unseen-add"));
      api.storage.delete({ type: widgetType(), namespace: "default", name: "before" });
      api.compact();
      await waitFor(
        "the relist after 410 to report the unseen add and delete",
        () => seen.includes("add unseen-add") && seen.includes("delete before"),
        20_000,
      );
      assert.ok(
        api.requests.some((r) => r.path.startsWith(path) && r.path.includes("watch=") && r.status === 410),
        "the watch from the old resourceVersion got 410",
      );
      assert.equal(lists() - listsBefore, 1, "exactly one relist");
      assert.equal(seen.filter((s) => s.startsWith("error")).length, 0, seen.join("\n"));
      assert.equal(seen.filter((s) => s === "add unseen-add").length, 1);
      assert.deepEqual(
        informer
          .list()
          .map((o) => o.metadata!.name)
          .sort(),
        ["during-drop", "unseen-add", "w1"],
      );
    } finally {
      await informer.stop();
    }
  });

  test("a raw watch replays from a retained resourceVersion, and answers 410 Expired in the Status shape for a compacted one", async () => {
    const w1 = (await custom.createNamespacedCustomObject({ ...cr, body: widget("raw1") })) as KubernetesObject;
    const from = w1.metadata!.resourceVersion!;
    await custom.patchNamespacedCustomObject({ ...cr, name: "raw1", body: [{ op: "replace", path: "/spec/size", value: 3 }] }, jsonPatch);
    const events: string[] = [];
    const watch = new Watch(kc);
    const req = await watch.watch(
      path,
      { resourceVersion: from },
      (type, obj: KubernetesObject) => events.push(`${type} ${obj.metadata?.name}`),
      () => undefined,
    );
    await waitFor("the replayed MODIFIED", () => events.includes("MODIFIED raw1"));
    assert.ok(!events.includes("ADDED raw1"), "events at or before the start version are not replayed");
    req.abort();

    api.compact();
    let expired: { statusCode?: number } | undefined;
    await watch.watch(
      path,
      { resourceVersion: from },
      () => undefined,
      (err: { statusCode?: number }) => (expired = err),
    );
    await waitFor("the 410", () => expired !== undefined);
    assert.equal(expired?.statusCode, 410);
    const raw = await rawGet(api, `${path}?watch=1&resourceVersion=${from}`);
    assert.equal(raw.status, 410);
    assert.equal(raw.body.kind, "Status");
    assert.equal(raw.body.code, 410);
    assert.equal(raw.body.reason, "Expired");
    const fresh = await rawGet(api, `${path}?watch=1&resourceVersion=${api.storage.resourceVersion}&timeoutSeconds=1`);
    assert.equal(fresh.status, 200, "a watch from the current version is served");
  });

  test("a watch with a label selector sees an object leave it as DELETED and enter it as ADDED; bookmarks come when asked", async () => {
    await custom.createNamespacedCustomObject({ ...cr, body: widget("sel", { tier: "web" }) });
    const events: string[] = [];
    const watch = new Watch(kc);
    const req = await watch.watch(
      path,
      { labelSelector: "tier=web", allowWatchBookmarks: true },
      (type, obj: KubernetesObject) => events.push(`${type} ${obj.metadata?.name ?? ""}`),
      () => undefined,
    );
    try {
      await waitFor("the synthetic ADDED of what exists", () => events.includes("ADDED sel"));
      await custom.patchNamespacedCustomObject(
        { ...cr, name: "sel", body: { metadata: { labels: { tier: "db" } } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      await waitFor("leaving the selector", () => events.includes("DELETED sel"));
      await custom.patchNamespacedCustomObject(
        { ...cr, name: "sel", body: [{ op: "replace", path: "/metadata/labels/tier", value: "web" }] },
        jsonPatch,
      );
      await waitFor("entering it again", () => events.filter((e) => e === "ADDED sel").length === 2);
      await waitFor("a bookmark", () => events.some((e) => e.startsWith("BOOKMARK")));
    } finally {
      req.abort();
    }
  });
});
