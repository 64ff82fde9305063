// The fake API server driven by the real kubectl (v1.32, /usr/bin/kubectl): apply a CRD and a custom
// resource from YAML, get it by plural, short name and category with its printer columns, -o yaml,
// the status subresource, get -w, delete, and the refusals kubectl shows.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { waitFor } from "../support/wait.js";
import { GROUP, PLURAL, widgetCrd } from "./fixtures.js";
import { startFakeApiServer, type FakeApiServer } from "./server.js";

let api: FakeApiServer;
let dir: string;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const kubectlArgs = (args: string[]): string[] => ["--kubeconfig", api.kubeconfigPath, "--cache-dir", join(dir, "cache"), ...args];

const kubectl = (args: string[], stdin?: string): Promise<Run> =>
  new Promise((resolve, reject) => {
    const child = spawn("kubectl", kubectlArgs(args), { stdio: ["pipe", "pipe", "pipe"] });
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

/** Rows of kubectl's table output, split on runs of spaces. */
const rows = (out: string): string[][] =>
  out
    .trim()
    .split("\n")
    .map((l) => l.trim().split(/\s{2,}/));

const widgetYaml = (name: string, size: number, extra = ""): string => `apiVersion: ${GROUP}/v1alpha1
kind: Widget
metadata:
  name: ${name}
  labels:
    team: platform
spec:
  size: ${size}
${extra}`;

before(async () => {
  api = await startFakeApiServer();
  dir = mkdtempSync(join(tmpdir(), "kubectl-test-"));
  // JSON is YAML: the CRD goes through kubectl's YAML reader like any manifest
  writeFileSync(join(dir, "crd.yaml"), JSON.stringify(widgetCrd(), null, 2));
  await ok(["apply", "-f", join(dir, "crd.yaml")]);
});
after(async () => {
  await api.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("kubectl against the fake API server", () => {
  test("apply from YAML, then get by plural, short name and category shows the printer columns", async () => {
    writeFileSync(join(dir, "w1.yaml"), widgetYaml("w1", 3));
    assert.match(await ok(["apply", "-f", join(dir, "w1.yaml")]), /widget.demo.flowsvc.io\/w1 created/);
    for (const name of [PLURAL, "wdg", "demo", `${PLURAL}.${GROUP}`]) {
      const table = rows(await ok(["get", name]));
      assert.deepEqual(table[0], ["NAME", "SIZE", "STATUS", "AGE"], `kubectl get ${name}`);
      assert.equal(table[1]?.[0], "w1");
      assert.equal(table[1]?.[1], "3");
      assert.match(table[1]?.at(-1) ?? "", /^\d+s$/);
    }
  });

  test("the status subresource through kubectl patch --subresource=status appears in the STATUS column; -o yaml shows defaults and generation", async () => {
    await ok(["apply", "-f", "-"], widgetYaml("w2", 1));
    await ok(["patch", "wdg", "w2", "--subresource=status", "--type=merge", "-p", '{"status":{"phase":"Ready","observedGeneration":1}}']);
    const table = rows(await ok(["get", "wdg", "w2"]));
    assert.deepEqual(table[1]?.slice(0, 3), ["w2", "1", "Ready"]);
    await ok(["apply", "-f", "-"], widgetYaml("w2", 2));
    const yaml = await ok(["get", "wdg", "w2", "-o", "yaml"]);
    assert.match(yaml, /^ {2}generation: 2$/m);
    assert.match(yaml, /^ {2}color: blue$/m, "the schema default was filled in");
    assert.match(yaml, /^ {2}phase: Ready$/m, "the apply of spec kept the status");
    assert.match(yaml, /kubectl.kubernetes.io\/last-applied-configuration/);
  });

  test("kubectl get -w prints the change made by another client", async () => {
    await ok(["apply", "-f", "-"], widgetYaml("watched", 1));
    const child = spawn("kubectl", kubectlArgs(["get", "wdg", "watched", "-w"]), { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    try {
      await waitFor("the first row", () => /^watched\s+1\s/m.test(out));
      await ok(["patch", "wdg", "watched", "--type=merge", "-p", '{"spec":{"size":7}}']);
      await waitFor("the watched change", () => /^watched\s+7\s/m.test(out));
    } finally {
      child.kill("SIGTERM");
    }
  });

  test("refusals: an unknown field (strict validation), a YAML 1.1 boolean where a string belongs, a missing object", async () => {
    const unknown = await kubectl(["apply", "-f", "-"], widgetYaml("bad1", 1, "  sizee: 2\n"));
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /strict decoding error: unknown field "spec.sizee"/);
    const yes = await kubectl(["apply", "-f", "-"], widgetYaml("bad2", 1, "  color: off\n"));
    assert.equal(yes.code, 1);
    assert.match(yes.stderr, /spec.color: Invalid value: "boolean": spec.color in body must be of type string/);
    const missing = await kubectl(["get", "wdg", "nope"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /Error from server \(NotFound\): widgets.demo.flowsvc.io "nope" not found/);
    assert.equal((await kubectl(["get", "wdg", "bad1"])).code, 1, "nothing was written");
  });

  test("kubectl delete removes the object; deleting the CRD removes its objects and its resource type", async () => {
    await ok(["apply", "-f", "-"], widgetYaml("gone", 1));
    assert.match(await ok(["delete", "wdg", "gone"]), /widget.demo.flowsvc.io "gone" deleted/);
    assert.equal((await kubectl(["get", "wdg", "gone"])).code, 1);
    assert.match(
      await ok(["delete", "-f", join(dir, "crd.yaml")]),
      /customresourcedefinition.apiextensions.k8s.io "widgets.demo.flowsvc.io" deleted/,
    );
    const after = await kubectl(["get", "wdg"]);
    assert.equal(after.code, 1);
    // with kubectl's discovery cache still fresh it tries the old path (as against a real cluster)
    assert.match(after.stderr, /the server doesn't have a resource type "wdg"|the server could not find the requested resource/);
    assert.equal([...api.storage.entries()].filter(([resource]) => resource === `${GROUP}/${PLURAL}`).length, 0);
  });
});
