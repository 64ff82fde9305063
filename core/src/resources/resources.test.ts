// The declarative resources' rules (one place for the API, the Postgres adapter, the reconcilers and
// the CRDs): parse functions with good and hostile input, the FlowEventHook spec checked by the API's
// rules, and the generated CRDs structural, with the contract's names and no YAML 1.1 trap.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ZodError } from "zod";
import { FlowError } from "../errors.js";
import { CRD_KINDS, flowsvcCrds, structural } from "./crds.js";
import { handlerResourceSpecOf, parseHandler, parseHandlerResource, reactionNodeGraph, reactionView } from "./handler.js";
import { hookIngestUrl, hookResourceSpecOf, parseHook, parseHookResource } from "./hook.js";
import { RunSubmission } from "./run.js";
import { SecretResourceSpec, parseSecretValue, resourceOfSecretName, secretNameOfResource } from "./secret.js";
import { CredentialResourceSpec, credentialBodyOfResource, credentialResourceSpecOf } from "./credential.js";
import { parseCredentialValue } from "../credentials/kinds.js";

const script = { kind: "script", source: "echo hi\n", filename: "h.sh" };

const flowError = (fn: () => unknown, message: RegExp, field?: string): void => {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof FlowError, `not a FlowError: ${String(e)}`);
    assert.equal(e.code, "invalid_argument");
    assert.match(e.message, message);
    if (field !== undefined) assert.equal(e.details?.field, field);
    return true;
  });
};

/** A ZodError whose issue is at `path` (the API maps it to a 400 naming that path). */
const zodAt = (fn: () => unknown, path: string): void => {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ZodError, `not a ZodError: ${String(e)}`);
    assert.ok(
      e.issues.some((i) => i.path.join(".") === path),
      `no issue at ${path}: ${JSON.stringify(e.issues.map((i) => i.path))}`,
    );
    return true;
  });
};

void test("a handler: patterns trimmed and deduplicated, `when` compiled, defaults filled; the CR spec maps `events` to `on` and back", () => {
  const h = parseHandler("deploy", { on: [" push ", "push", "order.*"], when: "event.payload.x > 1", reaction: script });
  assert.deepEqual(h, {
    name: "deploy",
    on: ["push", "order.*"],
    when: "event.payload.x > 1",
    reaction: script,
    tags: [],
    credentials: {},
  });
  assert.deepEqual(parseHandlerResource("deploy", handlerResourceSpecOf(h)), h);
  zodAt(() => parseHandlerResource("deploy", { on: ["push"], reaction: script }), "events");
  zodAt(() => parseHandlerResource("deploy", { events: [], reaction: script }), "events");
});

void test("a handler's refusals name the field: bad when, pattern, credential variable, filename, name; hostile input", () => {
  flowError(() => parseHandler("h", { on: ["x"], when: "event.", reaction: script }), /^when: /, "when");
  flowError(() => parseHandler("h", { on: ["x"], when: "", reaction: script }), /^when: /, "when");
  flowError(() => parseHandler("h", { on: ["a b"], reaction: script }), /pattern/);
  flowError(
    () => parseHandler("h", { on: ["x"], reaction: script, credentials: { LD_PRELOAD: "c" } }),
    /^credentials: /,
    "credentials.LD_PRELOAD",
  );
  flowError(() => parseHandler("h", { on: ["x"], reaction: script, credentials: { "A\u0000B": "c" } }), /^credentials: /);
  zodAt(() => parseHandler("h", { on: ["x"], reaction: { ...script, filename: "../etc/passwd" } }), "reaction.filename");
  zodAt(() => parseHandler("h", { on: ["x"], reaction: { ...script, filename: "a\u0000b" } }), "reaction.filename");
  zodAt(() => parseHandler("h", { on: ["x"], reaction: { ...script, kind: "yaml" } }), "reaction.kind");
  zodAt(() => parseHandler("h", { on: ["x"], reaction: { ...script, kind: "graph" } }), "reaction.graph");
  zodAt(() => parseHandler("h", { on: ["x"], reaction: script, extra: 1 }), "");
  zodAt(() => parseHandler("h", { on: ["x"], reaction: script, credentials: { A: "bad name" } }), "credentials.A");
  zodAt(() => parseHandler("h", { on: Array(65).fill("x"), reaction: script }), "on");
  zodAt(() => parseHandler("h", { on: ["x"], reaction: { ...script, source: "x".repeat(1024 * 1024 + 1) } }), "reaction.source");
  for (const name of ["", "-x", "a/b", "x".repeat(65), "a\u0000", "\ud800", "%2e%2e"])
    zodAt(() => parseHandler(name, { on: ["x"], reaction: script }), "");
  // A deeply nested `when` is refused by the CEL guard, not by a stack overflow.
  flowError(() => parseHandler("h", { on: ["x"], when: `${"(".repeat(5000)}1${")".repeat(5000)}`, reaction: script }), /^when: /);
});

void test("a hook: each mode's spec and signing key, the combinations refused with the API's messages", () => {
  assert.deepEqual(parseHook("ci", { event_type: "ci.done" }), {
    spec: { mode: "token", eventType: "ci.done", manifest: null, hmacHeader: null, hmacPrefix: null },
    signingKey: null,
  });
  assert.deepEqual(parseHook("gh", { manifest: "github", key: "k" }).spec.mode, "manifest");
  const hmac = parseHook("stripe", { hmac_header: "X-Sig", hmac_key: "k", hmac_prefix: "sha256=" });
  assert.deepEqual(hmac, {
    spec: { mode: "hmac", eventType: "stripe", manifest: null, hmacHeader: "x-sig", hmacPrefix: "sha256=" },
    signingKey: "k",
  });
  flowError(() => parseHook("gh", { manifest: "github" }), /needs --key/);
  flowError(() => parseHook("gh", { manifest: "gitlab", key: "k" }), /unknown manifest "gitlab"/);
  flowError(() => parseHook("gh", { manifest: "github", key: "k", hmac_key: "k" }), /not both/);
  flowError(() => parseHook("x", {}), /give --event-type/);
  flowError(() => parseHook("x", { event_type: "push" }), /reserved/);
  zodAt(() => parseHook("push", { event_type: "a.b" }), "");
  zodAt(() => parseHook("x", { hmac_header: "bad header\r\n", hmac_key: "k" }), "hmac_header");
  zodAt(() => parseHook("x", { event_type: "a", secret: "s" }), "");
});

void test("a FlowEventHook spec: refs stand for the values, checked by the same rules; no value field exists", () => {
  const ref = { name: "gh-hook", key: "signing-key" };
  assert.deepEqual(parseHookResource("gh", { manifest: "github", signingKeyRef: ref, secretRef: { name: "s", key: "k" } }), {
    spec: { mode: "manifest", eventType: null, manifest: "github", hmacHeader: null, hmacPrefix: null },
    secretRef: { name: "s", key: "k" },
    signingKeyRef: ref,
  });
  flowError(
    () => parseHookResource("gh", { manifest: "github" }),
    /^spec\.manifest github needs spec\.signingKeyRef: the secret the forge signs/,
  );
  flowError(
    () => parseHookResource("hm", { hmac_header: "X-Sig" }),
    /^a manual HMAC hook needs both spec\.hmac_header and spec\.signingKeyRef \(spec\.hmac_prefix is optional\)$/,
  );
  flowError(
    () => parseHookResource("hm", {}),
    /^give spec\.event_type \(shared token\), spec\.manifest with spec\.signingKeyRef, or spec\.hmac_header with spec\.signingKeyRef$/,
  );
  flowError(
    () => parseHookResource("gh", { manifest: "github", hmac_header: "X-Sig", signingKeyRef: ref }),
    /^give either spec\.manifest or spec\.hmac_header\/spec\.hmac_prefix, not both$/,
  );
  flowError(() => parseHookResource("gh", { manifest: "github", event_type: "x", signingKeyRef: ref }), /leave out spec\.event_type$/);
  assert.equal(parseHookResource("gh", { manifest: "github" }, true).signingKeyRef, null, "a key kept from the API needs no ref");
  assert.equal(parseHookResource("ci", { event_type: "ci.done" }, true).spec.mode, "token");
  flowError(
    () => parseHookResource("ci", { event_type: "ci.done", signingKeyRef: ref }),
    /^spec\.signingKeyRef goes with spec\.manifest or spec\.hmac_header$/,
  );
  zodAt(() => parseHookResource("gh", { manifest: "github", key: "in-the-clear" }), "");
  zodAt(() => parseHookResource("gh", { manifest: "github", signingKeyRef: { name: "Not_A_Name", key: "k" } }), "signingKeyRef.name");
  zodAt(() => parseHookResource("gh", { manifest: "github", signingKeyRef: { name: "n", key: "a/b" } }), "signingKeyRef.key");
  for (const body of [{ event_type: "ci.done" }, { manifest: "github", key: "k" }, { hmac_header: "X-Sig", hmac_key: "k" }]) {
    const { spec } = parseHook("h", body);
    const hasKey = spec.mode !== "token";
    assert.deepEqual(parseHookResource("h", hookResourceSpecOf(spec), hasKey).spec, spec, JSON.stringify(body));
  }
  assert.equal(hookIngestUrl("https://f.example/", "o", "a b", "h"), "https://f.example/api/v1/hooks/o/a%20b/h");
});

void test("a secret: the value's and the name's rules, never quoting the value; a FlowSecret spec holds only a reference", () => {
  assert.equal(parseSecretValue("API_TOKEN", { value: "v" }), "v");
  flowError(() => parseSecretValue("LD_PRELOAD", { value: "v" }), /LD_PRELOAD/);
  for (const value of ["a\u0000b", "\ud800", "x".repeat(64 * 1024 + 1)]) {
    assert.throws(
      () => parseSecretValue("API_TOKEN", { value }),
      (e: unknown) => e instanceof FlowError && !e.message.includes(value),
    );
  }
  zodAt(() => parseSecretValue("API_TOKEN", { value: 1 }), "value");
  assert.deepEqual(SecretResourceSpec.parse({}), {});
  zodAt(() => SecretResourceSpec.parse({ value: "s3cr3t" }), "");
  zodAt(() => SecretResourceSpec.parse({ valueFrom: { secretKeyRef: { name: "x" } } }), "valueFrom.secretKeyRef.key");
  // Secret names are environment variable names, metadata.name a DNS name: they map both ways.
  assert.deepEqual(resourceOfSecretName("API_TOKEN"), { metadataName: "api-token" });
  assert.equal(secretNameOfResource("api-token", {}), "API_TOKEN");
  for (const name of ["Api_Token", "_X", "A__B_", "x".repeat(100)]) {
    const r = resourceOfSecretName(name);
    assert.match(r.metadataName, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, name);
    assert.ok(r.metadataName.length <= 63, name);
    assert.equal(secretNameOfResource(r.metadataName, { secretName: r.secretName }), name);
  }
  assert.notEqual(resourceOfSecretName("Api_Token").metadataName, resourceOfSecretName("API_TOKEN").metadataName);
});

void test("a FlowCredential spec: a kind and references, never a value; each field only with its kind and valueFrom", () => {
  const ref = { secretKeyRef: { name: "gh", key: "token" } };
  const bearer = CredentialResourceSpec.parse({ kind: "bearer", valueFrom: ref });
  assert.deepEqual(parseCredentialValue("gh", credentialBodyOfResource(bearer, { value: "t0k" })), { kind: "bearer", token: "t0k" });
  const key = CredentialResourceSpec.parse({ kind: "api-key", header: "X-Api-Key", valueFrom: ref });
  assert.deepEqual(parseCredentialValue("k", credentialBodyOfResource(key, { value: "v" })), {
    kind: "api_key",
    header: "X-Api-Key",
    value: "v",
  });
  const basic = CredentialResourceSpec.parse({ kind: "basic", usernameFrom: ref, valueFrom: ref });
  assert.deepEqual(parseCredentialValue("b", credentialBodyOfResource(basic, { value: "pw", username: "al" })), {
    kind: "basic",
    username: "al",
    password: "pw",
  });
  const plain = CredentialResourceSpec.parse({ kind: "basic", username: "al", valueFrom: ref });
  assert.equal((parseCredentialValue("b", credentialBodyOfResource(plain, { value: "pw" })) as { username: string }).username, "al");
  // Set through the API: the spec says the kind only.
  assert.deepEqual(CredentialResourceSpec.parse(credentialResourceSpecOf("url_token")), { kind: "url-token" });
  zodAt(() => CredentialResourceSpec.parse({ kind: "bearer", value: "s3cr3t" }), "");
  zodAt(() => CredentialResourceSpec.parse({ kind: "api_key" }), "kind");
  zodAt(() => CredentialResourceSpec.parse({ kind: "api-key", valueFrom: ref }), "header");
  zodAt(() => CredentialResourceSpec.parse({ kind: "api-key", header: "Host", valueFrom: ref }), "header");
  zodAt(() => CredentialResourceSpec.parse({ kind: "api-key", header: "X-K\u0000", valueFrom: ref }), "header");
  zodAt(() => CredentialResourceSpec.parse({ kind: "bearer", header: "X-K", valueFrom: ref }), "header");
  zodAt(() => CredentialResourceSpec.parse({ kind: "basic", valueFrom: ref }), "username");
  zodAt(() => CredentialResourceSpec.parse({ kind: "basic", username: "a:b", valueFrom: ref }), "username");
  zodAt(() => CredentialResourceSpec.parse({ kind: "basic", username: "a", usernameFrom: ref, valueFrom: ref }), "usernameFrom");
  zodAt(() => CredentialResourceSpec.parse({ kind: "basic", username: "a" }), "username");
  zodAt(
    () => CredentialResourceSpec.parse({ kind: "bearer", valueFrom: { secretKeyRef: { name: "Not_A_Name", key: "k" } } }),
    "valueFrom.secretKeyRef.name",
  );
  zodAt(
    () => CredentialResourceSpec.parse({ kind: "bearer", valueFrom: { secretKeyRef: { name: "n", key: "a/b" } } }),
    "valueFrom.secretKeyRef.key",
  );
  // A value from a Secret breaks the rules like one from the API, and the message never quotes it.
  assert.throws(
    () => parseCredentialValue("gh", credentialBodyOfResource(bearer, { value: "line\nbreak-secret" })),
    (e: unknown) => e instanceof FlowError && /token: /.test(e.message) && !e.message.includes("break-secret"),
  );
});

void test("a run submission: env names checked by name, retry bounds, defaults", () => {
  const run = RunSubmission.parse({ kind: "script", source: "", filename: "a.py" });
  assert.deepEqual([run.env, run.tags], [{}, []]);
  zodAt(() => RunSubmission.parse({ ...script, env: { "1BAD": "x" } }), "env.1BAD");
  zodAt(() => RunSubmission.parse({ ...script, retry: { attempts: 1e300 } }), "retry.attempts");
  zodAt(() => RunSubmission.parse({ ...script, interpreter: [] }), "interpreter");
});

type Json = Record<string, unknown>;

/** Every schema node of a CRD's openAPIV3Schema, with its path. */
const nodes = function* (schema: Json, path: string): Generator<[string, Json]> {
  yield [path, schema];
  for (const [k, v] of Object.entries((schema.properties as Json | undefined) ?? {})) yield* nodes(v as Json, `${path}.${k}`);
  if (schema.items) yield* nodes(schema.items as Json, `${path}[]`);
  if (typeof schema.additionalProperties === "object") yield* nodes(schema.additionalProperties as Json, `${path}.*`);
};

// YAML 1.1 (kubectl's reader) reads these bare words as booleans.
const YAML11_BOOLEANS = /^(y|yes|n|no|on|off|true|false)$/i;

void test("the CRDs: the contract's names, printer columns and status; structural; no field or column kubectl's YAML 1.1 would misread", () => {
  const crds = flowsvcCrds();
  assert.deepEqual(
    crds.map((c) => (c.metadata as Json).name),
    [
      "flowhandlers.flowsvc.io",
      "floweventhooks.flowsvc.io",
      "flowsecrets.flowsvc.io",
      "flowcredentials.flowsvc.io",
      "flowgraphs.flowsvc.io",
      "flowruns.flowsvc.io",
    ],
  );
  const shortNames = {
    FlowHandler: ["fh"],
    FlowEventHook: ["feh"],
    FlowSecret: ["fsec"],
    FlowCredential: ["fcred"],
    FlowGraph: ["fg"],
    FlowRun: ["fr"],
  };
  for (const crd of crds) {
    const spec = crd.spec as { names: Json; scope: string; versions: Json[] };
    const kind = spec.names.kind as keyof typeof shortNames;
    assert.equal(spec.scope, "Namespaced");
    assert.deepEqual(spec.names.shortNames, shortNames[kind]);
    assert.deepEqual(spec.names.categories, ["flowsvc"]);
    const version = spec.versions[0]!;
    assert.deepEqual(version.subresources, { status: {} });
    const columns = (version.additionalPrinterColumns as Json[]).map((c) => c.name as string);
    assert.ok(columns.includes("Age"), kind);
    const root = (version.schema as Json).openAPIV3Schema as Json;
    const status = (root.properties as Json).status as Json;
    assert.ok("observedGeneration" in (status.properties as Json) && "conditions" in (status.properties as Json), kind);
    for (const [path, node] of nodes(root, "")) {
      assert.ok(typeof node.type === "string" || node["x-kubernetes-preserve-unknown-fields"] === true, `${kind}${path}: no type`);
      for (const key of ["$ref", "$defs", "oneOf", "allOf", "not"]) assert.ok(!(key in node), `${kind}${path}: ${key}`);
      assert.ok(node.additionalProperties === undefined || typeof node.additionalProperties === "object", `${kind}${path}`);
      assert.ok(!(node.properties && node.additionalProperties), `${kind}${path}: properties and additionalProperties`);
      const last = path.split(".").at(-1) ?? "";
      assert.ok(!YAML11_BOOLEANS.test(last), `${kind}${path}: a field kubectl reads as a boolean`);
    }
    for (const c of columns) assert.ok(!YAML11_BOOLEANS.test(c), `${kind} column ${c}`);
  }
  const cols = (kind: string): string[] =>
    (((crds[CRD_KINDS.findIndex((k) => k.kind === kind)]!.spec as Json).versions as Json[])[0]!.additionalPrinterColumns as Json[]).map(
      (c) => c.name as string,
    );
  assert.deepEqual(cols("FlowRun"), ["Status", "Substate", "Age", "Duration"]);
  assert.deepEqual(cols("FlowHandler"), ["Events", "Ready", "Age"]);
  assert.deepEqual(cols("FlowEventHook"), ["URL", "Ready", "Age"]);
  assert.deepEqual(cols("FlowSecret"), ["Source", "Set", "Ready", "Age"]);
  assert.deepEqual(cols("FlowCredential"), ["Kind", "Ready", "Set", "Age"]);
});

void test("structural(): $ref inlined, free JSON preserved, one-type unions kept as Kubernetes allows, others refused by path", () => {
  const out = structural(
    {
      type: "object",
      properties: {
        a: { $ref: "#/$defs/S" },
        input: {},
        u: {
          anyOf: [
            { type: "string", enum: ["x"] },
            { type: "string", enum: ["y"] },
          ],
        },
      },
      additionalProperties: false,
    },
    "",
    { S: { type: "string", maxLength: 3 } },
  );
  assert.deepEqual(out, {
    type: "object",
    properties: {
      a: { type: "string", maxLength: 3 },
      input: { "x-kubernetes-preserve-unknown-fields": true },
      u: { type: "string", enum: ["x", "y"] },
    },
  });
  assert.throws(
    () => structural({ anyOf: [{ type: "string" }, { type: "object" }] }, ".spec.x"),
    /^Error: \.spec\.x: a union of string, object/,
  );
});

void test("handler reactions: a pipeline (compiled at registration, refusals with line and column), a stored graph by name, one node", () => {
  const pipeline = { kind: "pipeline", source: "jobs:\n  a:\n    steps: [{run: echo}]\n", filename: "p.yaml" };
  assert.deepEqual(parseHandler("h", { on: ["x"], reaction: pipeline }).reaction, pipeline);
  assert.deepEqual(parseHandler("h", { on: ["x"], reaction: { kind: "graph", graph: "triage" } }).reaction, {
    kind: "graph",
    graph: "triage",
  });
  const node = { kind: "node", type: "emit", config: { type: "y" } };
  assert.deepEqual(parseHandler("h", { on: ["x"], reaction: node }).reaction, node);
  assert.deepEqual(reactionNodeGraph(node), {
    version: "flowsvc-graph/v1",
    nodes: [{ id: "reaction", type: "emit", config: { type: "y" } }],
    edges: [],
  });
  const refused = (reaction: unknown, message: RegExp, extra: Record<string, unknown> = {}): void => {
    assert.throws(
      () => parseHandler("h", { on: ["x"], reaction, ...extra }),
      (e: unknown) => e instanceof FlowError && e.code === "invalid_argument" && message.test(e.message),
      JSON.stringify(reaction),
    );
  };
  refused(
    { ...pipeline, source: "jobs:\n  a:\n    needs: nope\n    steps: [{run: x}]\n" },
    /^reaction\.source: line 3, column \d+: jobs\.a\.needs/,
  );
  refused({ ...pipeline, source: "jobs: [\u0000" }, /^reaction\.source: line 1/);
  refused(
    { ...pipeline, source: "concurrency: {group: '${{ steps.a.output }}'}\njobs:\n  a:\n    steps: [{run: x}]\n" },
    /^reaction\.source: line 1, column \d+: concurrency\.group: .*steps/,
  );
  refused({ kind: "node", type: "emit", config: {} }, /^reaction\.config\.type: /);
  refused({ kind: "node", type: "LD_PRELOAD", config: {} }, /^reaction\./);
  refused({ kind: "graph", graph: "g" }, /^credentials: only a script reaction/, { credentials: { TOKEN: "gh" } });
  assert.deepEqual(reactionView({ kind: "graph", graph: "g" }), { filename: "graph:g", source: "" });
  assert.deepEqual(reactionView({ kind: "node", type: "emit", config: { a: 1 } }), { filename: "node:emit", source: '{"a":1}' });
});
