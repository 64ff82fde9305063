import { test } from "node:test";
import assert from "node:assert/strict";
import { httpStatusOf } from "../errors.js";
import type { NameHolding } from "../credentials/resolve.js";
import { GRAPH_VERSION } from "./model.js";
import type { ManifestInfo } from "./node-configs.js";
import { assertGraph } from "./parse.js";
import { graphCredentialRequirements, requirementsReport, submitCheck } from "./requirements.js";

const manifests: Record<string, ManifestInfo> = {
  "slack.post_message": { type: "slack.post_message", credential: { kinds: ["bearer"], required: true } },
  "demo.echo": { type: "demo.echo", credential: { kinds: ["api_key", "bearer"], required: false } },
};
const manifestOf = (t: string): ManifestInfo | undefined => manifests[t];

const graph = assertGraph(
  {
    version: GRAPH_VERSION,
    nodes: [
      { id: "fetch", type: "http", config: { url: "https://x", credential: "api" } },
      { id: "dyn", type: "http", config: { url: "https://x", credential: { $expr: "input.cred" } } },
      { id: "plain", type: "http", config: { url: "https://x" } },
      { id: "build", type: "code", config: { source: "x", credentials: { GH: "gh", NPM: "npm" } } },
      { id: "sh", type: "shell", config: { command: "x", credentials: { TOKEN: "both" } } },
      { id: "child", type: "workflow", config: { from_repo: { repo: "acme/flows", path: "g.json", credential: "forge" } } },
      { id: "say", type: "slack.post_message", config: { credential: "slack", text: "hi" } },
      { id: "echo", type: "demo.echo", config: {} },
    ],
  },
  { manifestOf },
);

void test("every place a graph names a credential is found, with the kinds the use requires", () => {
  assert.deepEqual(graphCredentialRequirements(graph, manifestOf), [
    { node_id: "fetch", name: "api", required: true },
    { node_id: "dyn", name: null, required: true },
    { node_id: "build", name: "gh", required: true },
    { node_id: "build", name: "npm", required: true },
    { node_id: "sh", name: "both", required: true },
    { node_id: "child", name: "forge", required_kinds: ["bearer", "url_token"], required: true },
    { node_id: "say", name: "slack", required_kinds: ["bearer"], required: true },
  ]);
});

const holdings: Record<string, NameHolding> = {
  api: { credential: { kind: "api_key" } },
  gh: { credential: { kind: "bearer" } },
  both: { credential: { kind: "bearer" }, account: { status: "active" } },
  forge: { credential: { kind: "basic" } },
  slack: { account: { status: "needs_reauth" } },
};

void test("the report: each state by core's resolver; dynamic names listed apart; ready only when all are ok", () => {
  const report = requirementsReport(graphCredentialRequirements(graph, manifestOf), (n) => holdings[n]);
  assert.equal(report.ready, false);
  assert.deepEqual(
    report.credentials.map((c) => [c.node_id, c.name, c.state, c.required_kind, c.stored_kind]),
    [
      ["fetch", "api", "ok", undefined, "api_key"],
      ["build", "gh", "ok", undefined, "bearer"],
      ["build", "npm", "missing", undefined, undefined],
      ["sh", "both", "conflict", undefined, "bearer"],
      ["child", "forge", "wrong_kind", "bearer|url_token", "basic"],
      ["say", "slack", "needs_reconnect", "bearer", "bearer"],
    ],
  );
  assert.deepEqual(report.dynamic, [{ node_id: "dyn" }]);
  assert.equal(report.credentials[0]!.problem, undefined);
  assert.match(report.credentials[2]!.problem!, /credential "npm" is not set in this project/);
  // Every name stored as needed: ready, even with a dynamic name (it is checked when the node runs).
  const all: Record<string, NameHolding> = {
    api: { credential: { kind: "api_key" } },
    gh: { credential: { kind: "bearer" } },
    npm: { credential: { kind: "basic" } },
    both: { credential: { kind: "bearer" } },
    forge: { credential: { kind: "url_token" } },
    slack: { account: { status: "active" } },
  };
  const ok = requirementsReport(graphCredentialRequirements(graph, manifestOf), (n) => all[n]);
  assert.equal(ok.ready, true);
  assert.equal(submitCheck(ok), undefined);
});

void test("submitCheck names the node, the required kind and the stored kind", () => {
  const report = requirementsReport(graphCredentialRequirements(graph, manifestOf), (n) => holdings[n]);
  const e = submitCheck(report)!;
  assert.equal(httpStatusOf(e.code), 400);
  const sentences = e.message.split("; ");
  assert.deepEqual(sentences.slice(0, 2), [
    'node build: credential "npm" is missing',
    'node sh: "both" is held by both a credential and a connected account, so it resolves to neither: remove one',
  ]);
  assert.equal(sentences[2], 'node child: credential "forge" is basic, node child needs bearer or url-token');
  assert.match(sentences[3]!, /^node say: connected account "slack" is needs_reauth: reconnect it/);
  assert.deepEqual((e.details as { credentials: unknown[] }).credentials.length, 6);
  // A missing credential of a fixed kind says the kind.
  const missing = requirementsReport(
    [{ node_id: "child", name: "forge", required_kinds: ["bearer", "url_token"], required: true }],
    () => undefined,
  );
  assert.equal(submitCheck(missing)!.message, 'node child: credential "forge" is missing (required kind bearer or url-token)');
});
