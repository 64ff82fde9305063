/**
 * The connector executor (controller/src/graph/nodes/connector.ts) against the protocol-faithful
 * peers, in process: each request must pass the checks the real API makes (auth header, version
 * header, body shape) and each answer must become the node's outcome as the real one would. The
 * NodeContext is built here with the one thing the executor asks of the engine, `credential()`:
 * a name that is not held throws as the engine's resolver does.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { FlowError, type CredentialValue } from "@flowsvc/core";
import { connectorExecutor, setConnectorBaseUrls } from "@flowsvc/controller/graph/nodes/connector";
import type { NodeContext, NodeOutcome } from "@flowsvc/controller/graph/nodes/types";
import { LlmPeer } from "./llm.js";
import { SlackPeer } from "./slack.js";
import { GithubStatusPeer } from "./github-status.js";

const llm = new LlmPeer({ apiKey: "sk-ant-test-key" });
const slack = new SlackPeer({ token: "xoxb-test-token", channels: ["C0DEPLOY"] });
const github = new GithubStatusPeer({ token: "ghp_test_token" });

const HELD: Record<string, CredentialValue> = {
  claude: { kind: "api_key", header: "x-api-key", value: "sk-ant-test-key" },
  "claude-bearer": { kind: "bearer", token: "sk-ant-test-key" },
  "claude-old": { kind: "api_key", header: "x-api-key", value: "sk-ant-revoked" },
  slack: { kind: "bearer", token: "xoxb-test-token" },
  "slack-old": { kind: "bearer", token: "xoxb-revoked" },
  github: { kind: "bearer", token: "ghp_test_token" },
};

const ctxOf = (type: string, config: Record<string, unknown>): NodeContext =>
  ({
    node: { id: "n1", type, config },
    config,
    attempt: 1,
    signal: new AbortController().signal,
    credential: (name: string) => {
      const value = HELD[name];
      if (!value) return Promise.reject(new FlowError("invalid_argument", `credential "${name}" is not set in this project`));
      return Promise.resolve({ name, value, masks: [] });
    },
  }) as unknown as NodeContext;

const run = (type: string, config: Record<string, unknown>): Promise<NodeOutcome> => connectorExecutor.start(ctxOf(type, config));

const outputOf = (o: NodeOutcome): { status: number; body: Record<string, unknown> } => {
  assert.ok(o.kind === "succeeded" || o.kind === "failed", o.kind);
  return o.output as { status: number; body: Record<string, unknown> };
};

before(async () => {
  await Promise.all([llm.start(), slack.start(), github.start()]);
  setConnectorBaseUrls({ anthropic: llm.url, slack: `${slack.url}/api`, github: github.url });
});
after(async () => {
  setConnectorBaseUrls({});
  await Promise.all([llm.stop(), slack.stop(), github.stop()]);
});

const MODEL = { model: "claude-sonnet-4-5", max_tokens: 64 };

void test("anthropic.messages: the key in x-api-key, the version header, the prompt as the one user turn; the reply at body.content[0].text", async () => {
  llm.replies.push("auto");
  const o = await run("anthropic.messages", { credential: "claude", with: MODEL, input: "Route this change: docs only" });
  assert.equal(o.kind, "succeeded", JSON.stringify(o));
  const out = outputOf(o);
  assert.equal(out.status, 200);
  assert.equal((out.body["content"] as Array<{ text: string }>)[0]!.text, "auto");
  const seen = llm.requests.at(-1)!;
  assert.equal(seen.headers["x-api-key"], "sk-ant-test-key");
  assert.equal(seen.headers["anthropic-version"], "2023-06-01");
  assert.equal(seen.headers["authorization"], undefined);
  assert.deepEqual(llm.calls.at(-1), {
    ...MODEL,
    messages: [{ role: "user", content: "Route this change: docs only" }],
    prompt: "Route this change: docs only",
  });
});

void test("anthropic.messages: a revoked key or a credential of another kind reaches the far side, which refuses it (401)", async () => {
  const wrong = await run("anthropic.messages", { credential: "claude-old", with: MODEL, input: "x" });
  assert.equal(wrong.kind, "failed");
  assert.match(wrong.kind === "failed" ? wrong.error : "", /HTTP 401 \(authentication_error: invalid x-api-key\)/);
  // Spec, Credential rule 4: a bearer credential goes out as a bearer header; the API wants x-api-key.
  const kind = await run("anthropic.messages", { credential: "claude-bearer", with: MODEL, input: "x" });
  assert.match(kind.kind === "failed" ? kind.error : "", /HTTP 401 \(authentication_error: x-api-key header is required\)/);
  assert.equal(llm.requests.at(-1)!.headers["authorization"], "Bearer sk-ant-test-key");
});

void test("an explicit config header wins over the credential's header of the same name", async () => {
  const o = await run("anthropic.messages", {
    credential: "claude-old",
    with: MODEL,
    input: "x",
    headers: { "X-Api-Key": "sk-ant-test-key" },
  });
  assert.equal(o.kind, "succeeded", JSON.stringify(o));
  assert.equal(llm.requests.at(-1)!.headers["x-api-key"], "sk-ant-test-key");
});

void test("a missing credential or bad config fails the node and nothing is sent", async () => {
  const before = llm.requests.length + slack.requests.length + github.requests.length;
  const missing = await run("anthropic.messages", { credential: "nope", with: MODEL, input: "x" });
  assert.match(missing.kind === "failed" ? missing.error : "", /credential "nope" is not set in this project: nothing was sent/);
  const bad = await run("anthropic.messages", { credential: "claude", with: { model: "m" }, input: "x\u0000" });
  assert.match(bad.kind === "failed" ? bad.error : "", /config\.with\.max_tokens: required; config\.input: holds a NUL/);
  const none = await run("slack.post_message", { with: { channel: "C0DEPLOY", text: "hi" } });
  assert.match(none.kind === "failed" ? none.error : "", /config\.credential: required/);
  assert.equal(llm.requests.length + slack.requests.length + github.requests.length, before);
});

void test("slack.post_message: bearer auth, channel and text; Slack's ok:false (HTTP 200) fails the node", async () => {
  const o = await run("slack.post_message", { credential: "slack", with: { channel: "C0DEPLOY" }, input: "deploy is waiting for you" });
  assert.equal(o.kind, "succeeded", JSON.stringify(o));
  assert.equal(outputOf(o).body["ok"], true);
  assert.deepEqual(slack.posts.at(-1)?.text, "deploy is waiting for you");
  assert.equal(slack.requests.at(-1)!.headers["authorization"], "Bearer xoxb-test-token");
  const bad = await run("slack.post_message", { credential: "slack-old", with: { channel: "C0DEPLOY", text: "x" } });
  assert.equal(bad.kind, "failed");
  assert.equal(outputOf(bad).status, 200);
  assert.match(bad.kind === "failed" ? bad.error : "", /slack\.post_message: the far side answered ok: false \(invalid_auth\)/);
  const channel = await run("slack.post_message", { credential: "slack", with: { channel: "C0NOPE", text: "x" } });
  assert.match(channel.kind === "failed" ? channel.error : "", /\(channel_not_found\)/);
});

void test("github.report_run_status: a commit status (201) with bearer auth; a refused state never leaves", async () => {
  const sha = "0123456789abcdef0123456789abcdef01234567";
  const with_ = {
    owner: "acme",
    repo: "web",
    sha,
    state: "success",
    context: "flowsvc/deploy",
    target_url: "https://flow.example/runs/r1",
  };
  const o = await run("github.report_run_status", { credential: "github", with: with_ });
  assert.equal(o.kind, "succeeded", JSON.stringify(o));
  assert.equal(outputOf(o).status, 201);
  assert.deepEqual(github.statuses.at(-1), {
    owner: "acme",
    repo: "web",
    sha,
    state: "success",
    context: "flowsvc/deploy",
    target_url: with_.target_url,
    description: null,
  });
  assert.equal(github.requests.at(-1)!.headers["authorization"], "Bearer ghp_test_token");
  const sent = github.requests.length;
  const bad = await run("github.report_run_status", { credential: "github", with: { ...with_, state: "green" } });
  assert.match(bad.kind === "failed" ? bad.error : "", /with\.state: must be one of error, failure, pending, success/);
  assert.equal(github.requests.length, sent);
});

void test("the peers refuse what the real APIs refuse", async () => {
  const post = (url: string, headers: Record<string, string>, body: unknown) =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) }).then(
      async (r) => ({
        status: r.status,
        json: (await r.json()) as Record<string, unknown>,
      }),
    );
  const key = { "x-api-key": "sk-ant-test-key" };
  const noVersion = await post(`${llm.url}/v1/messages`, key, { ...MODEL, messages: [{ role: "user", content: "x" }] });
  assert.equal(noVersion.status, 400);
  const v = { ...key, "anthropic-version": "2023-06-01" };
  const noMessages = await post(`${llm.url}/v1/messages`, v, MODEL);
  assert.deepEqual([noMessages.status, (noMessages.json["error"] as { type: string }).type], [400, "invalid_request_error"]);
  const assistantFirst = await post(`${llm.url}/v1/messages`, v, { ...MODEL, messages: [{ role: "assistant", content: "x" }] });
  assert.equal(assistantFirst.status, 400);
  assert.deepEqual((await post(`${slack.url}/api/chat.postMessage`, {}, { channel: "C0DEPLOY", text: "x" })).json, {
    ok: false,
    error: "not_authed",
  });
  const noAuth = await post(`${github.url}/repos/a/b/statuses/${"a".repeat(40)}`, { "user-agent": "t" }, { state: "success" });
  assert.deepEqual([noAuth.status, noAuth.json["message"]], [401, "Requires authentication"]);
});
