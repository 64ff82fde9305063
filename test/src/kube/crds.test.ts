// flowsvc's generated CRDs (crds/, from core's zod schemas) with the real kubectl against the fake
// API server: crds/ is fresh; `kubectl apply -f crds/` and a sample of each kind; `kubectl get flowsvc`
// lists them with their printer columns; a FlowRun's spec cannot change once submitted (the CRD's
// transition rule); `kubectl explain` walks the schema; the apiserver's schema validation refuses an
// unknown field, a wrong type, and the YAML 1.1 `on:` trap.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { ApiException, CustomObjectsApi, KubeConfig, type V1Status } from "@kubernetes/client-node";
import { CRD_KINDS } from "@flowsvc/core";
import { startFakeApiServer, type FakeApiServer } from "./server.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..", "..");
const crdsDir = join(root, "crds");
const fixtures = join(root, "test", "fixtures", "k8s");
const KINDS = ["flowhandler", "floweventhook", "flowsecret", "flowcredential", "flowgraph", "flowrun"];

let api: FakeApiServer;
let dir: string;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const kubectl = (args: string[], stdin?: string): Promise<Run> =>
  new Promise((resolve, reject) => {
    const child = spawn("kubectl", ["--kubeconfig", api.kubeconfigPath, "--cache-dir", join(dir, "cache"), ...args], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin ?? "");
  });

const ok = async (args: string[], stdin?: string): Promise<string> => {
  const r = await kubectl(args, stdin);
  assert.equal(r.code, 0, `kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
};

/** The table kubectl prints for one kind (the block whose header has `column`): header and rows, split on runs of spaces. */
const tableOf = (out: string, column: string): string[][] => {
  const block = out.split(/\n\s*\n/).find((b) => b.trimStart().split("\n")[0]!.split(/\s+/).includes(column)) ?? "";
  return block
    .trim()
    .split("\n")
    .map((l) => l.trim().split(/\s{2,}/));
};

/** PUTs FlowRun `name` (default namespace) with its spec changed by `edit`; answers the Status the API refused it with. */
const replaceRefused = async (name: string, edit: (spec: Record<string, unknown>) => Record<string, unknown>): Promise<V1Status> => {
  const kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const target = { group: "flowsvc.io", version: "v1alpha1", namespace: "default", plural: "flowruns", name };
  const current = (await custom.getNamespacedCustomObject(target)) as { spec: Record<string, unknown> };
  try {
    await custom.replaceNamespacedCustomObject({ ...target, body: { ...current, spec: edit(current.spec) } });
  } catch (err) {
    if (err instanceof ApiException) return JSON.parse(err.body as string) as V1Status;
    throw err;
  }
  return assert.fail("the PUT was accepted");
};

const fixture = (kind: string): string => readFileSync(join(fixtures, `${kind}.yaml`), "utf8");

before(async () => {
  api = await startFakeApiServer();
  dir = mkdtempSync(join(tmpdir(), "crds-test-"));
  await ok(["apply", "-f", crdsDir]);
});
after(async () => {
  await api?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("flowsvc's CRDs with kubectl", () => {
  test("crds/ is what scripts/gen-crds.mjs generates from core's schemas", async () => {
    const r = await new Promise<{ code: number; out: string }>((resolve) =>
      execFile(process.execPath, [join(root, "scripts", "gen-crds.mjs"), "--check"], (err, stdout, stderr) =>
        resolve({ code: err ? Number(err.code ?? 1) : 0, out: stdout + stderr }),
      ),
    );
    assert.equal(r.code, 0, r.out);
  });

  test("the README's upgrade step (`kubectl apply --server-side --force-conflicts -f crds/`) brings an older CRD up to date", async () => {
    const columns = ["get", "crd", "flowruns.flowsvc.io", "-o", "jsonpath={.spec.versions[0].additionalPrinterColumns[*].name}"];
    const current = await ok(columns);
    assert.match(current, /Status/, current);
    // An older chart's CRD: what `helm upgrade` would leave in place (Helm never upgrades crds/).
    await ok([
      "patch",
      "crd",
      "flowruns.flowsvc.io",
      "--type=json",
      "-p",
      '[{"op":"remove","path":"/spec/versions/0/additionalPrinterColumns"}]',
    ]);
    assert.equal(await ok(columns), "");
    const out = await ok(["apply", "--server-side", "--force-conflicts", "-f", crdsDir]);
    for (const kind of KINDS)
      assert.match(
        out,
        new RegExp(`^customresourcedefinition\\.apiextensions\\.k8s\\.io/${kind}s\\.flowsvc\\.io serverside-applied$`, "m"),
        out,
      );
    assert.equal(await ok(columns), current);
  });

  test("a sample of each kind applies; `kubectl get flowsvc` lists them with their printer columns; status shows in Ready", async () => {
    const applied = await ok(["apply", "-f", fixtures]);
    for (const kind of KINDS) assert.match(applied, new RegExp(`^${kind}\\.flowsvc\\.io/\\S+ created$`, "m"), kind);
    await ok([
      "patch",
      "fh",
      "deploy",
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({
        status: {
          observedGeneration: 1,
          conditions: [{ type: "Ready", status: "True", reason: "Reconciled", message: "", lastTransitionTime: "2026-11-24T06:00:00Z" }],
        },
      }),
    ]);
    await ok(["patch", "fr", "hello", "--subresource=status", "--type=merge", "-p", '{"status":{"status":"succeeded","duration":"3s"}}']);
    const all = await ok(["get", "flowsvc"]);
    const handlers = tableOf(all, "EVENTS");
    assert.deepEqual(handlers[0], ["NAME", "EVENTS", "READY", "AGE"], all);
    assert.deepEqual(handlers[1]?.slice(0, 3), ["flowhandler.flowsvc.io/deploy", '["deploy.*"]', "True"], all);
    assert.deepEqual(tableOf(all, "URL")[0], ["NAME", "URL", "READY", "AGE"], all);
    const secrets = tableOf(all, "SOURCE");
    assert.deepEqual(secrets[0], ["NAME", "SOURCE", "SET", "READY", "AGE"]);
    assert.deepEqual(secrets[1]?.slice(0, 2), ["flowsecret.flowsvc.io/api-token", "api-credentials"]);
    const credentials = tableOf(all, "KIND");
    assert.deepEqual(credentials[0], ["NAME", "KIND", "READY", "SET", "AGE"], all);
    assert.deepEqual(credentials[1]?.slice(0, 2), ["flowcredential.flowsvc.io/billing-api", "api-key"], all);
    const runs = tableOf(all, "STATUS");
    assert.deepEqual(runs[0], ["NAME", "STATUS", "SUBSTATE", "AGE", "DURATION"]);
    // SUBSTATE is empty: the row's cells are split on runs of spaces, so the duration is the last one.
    assert.deepEqual([runs[1]?.[0], runs[1]?.[1], runs[1]?.at(-1)], ["flowrun.flowsvc.io/hello", "succeeded", "3s"]);
    for (const kind of KINDS) assert.match(all, new RegExp(`^${kind}\\.flowsvc\\.io/`, "m"), `kubectl get flowsvc lists ${kind}`);
    // A YAML 1.1 word as a value stays a string where the schema says string (quoted in the fixture).
    assert.match(await ok(["get", "fr", "hello", "-o", "jsonpath={.spec.env.GREETING}"]), /^yes$/);
  });

  test("a FlowRun's spec is immutable once submitted: an edited spec is refused (422, field spec, the message), the same spec and a label apply", async () => {
    const run = fixture("flowrun").replace("name: hello", "name: frozen");
    await ok(["apply", "-f", "-"], run);
    const uid = await ok(["get", "fr", "frozen", "-o", "jsonpath={.metadata.uid}"]);
    for (const edited of [
      run.replace("echo hello", "echo bye"),
      run.replace('GREETING: "yes"', 'GREETING: "yes"\n    LD_PRELOAD: /tmp/evil.so'),
      run.replace("  kind: script", '  kind: script\n  tags: ["a\\u0000b"]'),
    ]) {
      const refused = await kubectl(["apply", "-f", "-"], edited);
      assert.equal(refused.code, 1, edited);
      assert.match(
        refused.stderr,
        /The FlowRun "frozen" is invalid: spec: Invalid value: "object": spec is immutable once submitted/,
        `${edited}\n${refused.stderr}`,
      );
    }
    // A PUT, as a client reads the answer: 422 Invalid with the field.
    const status = await replaceRefused("frozen", (spec) => ({ ...spec, source: "echo bye\n" }));
    assert.deepEqual(
      [status.code, status.reason, status.details?.causes],
      [
        422,
        "Invalid",
        [{ reason: "FieldValueInvalid", field: "spec", message: 'Invalid value: "object": spec is immutable once submitted' }],
      ],
    );
    assert.match(await ok(["get", "fr", "frozen", "-o", "jsonpath={.spec.source}"]), /^echo hello\n$/, "nothing changed");
    assert.match(await ok(["apply", "-f", "-"], run), /unchanged/, "the same spec again");
    await ok(["label", "fr", "frozen", "team=a"]);
    assert.equal(await ok(["get", "fr", "frozen", "-o", "jsonpath={.metadata.generation}"]), "1");
    await ok(["delete", "fr", "frozen"]);
    await ok(["apply", "-f", "-"], run.replace("echo hello", "echo bye")); // a new one: made again
    assert.notEqual(await ok(["get", "fr", "frozen", "-o", "jsonpath={.metadata.uid}"]), uid);
  });

  test("kubectl explain walks a kind's schema", async () => {
    const out = await ok(["explain", "flowhandler.spec"]);
    assert.match(out, /KIND:\s+FlowHandler/);
    assert.match(out, /events\s+<\[\]string> -required-/);
    assert.match(out, /Event type patterns that start the handler/);
    assert.match(await ok(["explain", "floweventhook.spec.signingKeyRef"]), /key\s+<string> -required-/);
  });

  test("the apiserver's schema validation refuses an unknown field, a wrong type, a missing field and `on:` (YAML 1.1 reads it as true)", async () => {
    const handler = fixture("flowhandler").replace("name: deploy", "name: bad");
    const unknown = await kubectl(
      ["apply", "--validate=strict", "-f", "-"],
      handler.replace("  tags: [gitops]", "  tags: [gitops]\n  retries: 3"),
    );
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /unknown field "spec.retries"/);
    const wrongType = await kubectl(["apply", "-f", "-"], handler.replace("tags: [gitops]", "tags: gitops"));
    assert.equal(wrongType.code, 1);
    assert.match(wrongType.stderr, /spec.tags: Invalid value: "string": spec.tags in body must be of type array/);
    // Written as the API's field next to `events`: the only fault left is the key YAML 1.1 reads as a boolean.
    const trap = await kubectl(
      ["apply", "--validate=strict", "-f", "-"],
      handler.replace('  events: ["deploy.*"]', '  events: ["deploy.*"]\n  on: ["deploy.*"]'),
    );
    assert.equal(trap.code, 1);
    assert.match(trap.stderr, /unknown field "spec.true"/, "kubectl turned the key `on` into `true`");
    const missing = await kubectl(["apply", "-f", "-"], handler.replace('  events: ["deploy.*"]\n', ""));
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /spec.events: Required value/);
    const badRef = await kubectl(["apply", "-f", "-"], fixture("flowsecret").replace("name: api-credentials", "name: Not_A_Secret"));
    assert.equal(badRef.code, 1);
    assert.match(badRef.stderr, /spec.valueFrom.secretKeyRef.name in body should match/);
    const badKind = await kubectl(["apply", "-f", "-"], fixture("flowcredential").replace("kind: api-key", "kind: api_key"));
    assert.equal(badKind.code, 1);
    assert.match(badKind.stderr, /spec.kind: Unsupported value: "api_key": supported values: "bearer", "api-key", "basic", "url-token"/);
    assert.equal((await kubectl(["get", "fh", "bad"])).code, 1, "nothing was written");
    // The README's example applies as written.
    const example = await kubectl([
      "apply",
      "--validate=strict",
      "-n",
      "kube-system",
      "-f",
      join(root, "examples", "k8s", "credential.yaml"),
      "-f",
      join(root, "examples", "k8s", "graph.yaml"),
    ]);
    assert.equal(example.code, 0, example.stderr);
  });

  test("as the apiserver stores them (its defaults applied), the README's examples, the fixtures and a handler of each reaction kind are specs core accepts", async () => {
    await ok(
      ["apply", "-f", "-"],
      ["stored", "stored-fixtures"].map((n) => `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${n}}\n`).join("---\n"),
    );
    const reactions = [
      "{kind: pipeline, filename: p.yaml, source: 'steps: []'}",
      "{kind: graph, graph: nightly}",
      "{kind: node, type: http}",
    ];
    const handlers = reactions
      .map((r, i) => `apiVersion: flowsvc.io/v1alpha1\nkind: FlowHandler\nmetadata: {name: r${i}}\nspec: {events: [a.b], reaction: ${r}}\n`)
      .join("---\n");
    await ok(["apply", "-n", "stored", "-f", "-"], handlers);
    await ok(["create", "-n", "stored", "-f", join(root, "examples", "k8s")]);
    await ok(["create", "-n", "stored-fixtures", "-f", fixtures]);
    let checked = 0;
    for (const k of CRD_KINDS) {
      const { items } = JSON.parse(await ok(["get", k.plural, "--all-namespaces", "-o", "json"])) as {
        items: Array<{ metadata: { name: string }; spec: unknown }>;
      };
      for (const o of items) {
        const parsed = k.spec.safeParse(o.spec);
        assert.ok(parsed.success, `${k.kind} ${o.metadata.name} as stored: ${JSON.stringify(o.spec)}: ${parsed.error?.message}`);
        checked++;
      }
    }
    assert.ok(checked >= 14, `checked ${checked}`);
  });
});
