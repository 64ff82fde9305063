import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "../errors.js";
import {
  CONNECTOR_TYPES,
  connectorConfigProblems,
  connectorManifest,
  parseConnectorBaseUrls,
  type ConnectorManifest,
} from "./connectors.js";

const manifest = (type: string): ConnectorManifest => {
  const m = connectorManifest(type);
  assert.ok(m, type);
  return m;
};

const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof FlowError);
    return e.message;
  }
  assert.fail("expected a refusal");
};

void test("the shipped connectors, each with the credential kind it expects, all required", () => {
  assert.deepEqual(CONNECTOR_TYPES, ["slack.post_message", "anthropic.messages", "github.report_run_status"]);
  assert.deepEqual(manifest("slack.post_message").credential, { kinds: ["bearer"], required: true });
  assert.deepEqual(manifest("anthropic.messages").credential, { kinds: ["api_key"], required: true });
  assert.deepEqual(manifest("github.report_run_status").credential, { kinds: ["bearer"], required: true });
  assert.equal(connectorManifest("http"), undefined);
  assert.equal(connectorManifest("__proto__"), undefined);
});

void test("anthropic.messages: with -> body, input -> the one user message, version header, the real URL", () => {
  const req = manifest("anthropic.messages").request({
    credential: "claude",
    with: { model: "claude-sonnet-4-5", max_tokens: 64 },
    input: "Should this deploy go ahead?",
  });
  assert.deepEqual(req, {
    method: "POST",
    url: "https://api.anthropic.com/v1/messages",
    headers: { "content-type": "application/json; charset=utf-8", accept: "application/json", "anthropic-version": "2023-06-01" },
    body: { model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "Should this deploy go ahead?" }] },
  });
});

void test("a base URL override replaces the real API's; explicit headers replace the manifest's", () => {
  const req = manifest("anthropic.messages").request(
    { credential: "c", with: { model: "m", max_tokens: 1 }, input: "x", headers: { "Anthropic-Version": "2024-01-01", "x-trace": "1" } },
    { baseUrls: { anthropic: "http://127.0.0.1:9/" } },
  );
  assert.equal(req.url, "http://127.0.0.1:9/v1/messages");
  assert.equal(req.headers["Anthropic-Version"], "2024-01-01");
  assert.equal(req.headers["anthropic-version"], undefined);
  assert.equal(req.headers["x-trace"], "1");
});

void test("slack.post_message: channel and text (or input as the text) in the body", () => {
  const m = manifest("slack.post_message");
  assert.deepEqual(m.request({ credential: "s", with: { channel: "C1", text: "hi", thread_ts: "1.2" } }).body, {
    channel: "C1",
    text: "hi",
    thread_ts: "1.2",
  });
  assert.equal(m.request({ credential: "s", with: { channel: "C1" }, input: "from input" }).url, "https://slack.com/api/chat.postMessage");
  assert.deepEqual(m.request({ credential: "s", with: { channel: "C1" }, input: "from input" }).body, {
    channel: "C1",
    text: "from input",
  });
  assert.match(
    refusal(() => m.request({ credential: "s", with: { channel: "C1" } })),
    /config\.input: required \(the text text, or with\.text\)/,
  );
});

void test("github.report_run_status: owner/repo/sha fill the path, the rest is the body; state is an enum", () => {
  const m = manifest("github.report_run_status");
  const sha = "a".repeat(40);
  const req = m.request({ credential: "gh", with: { owner: "acme", repo: "web", sha, state: "success", context: "flowsvc/deploy" } });
  assert.equal(req.url, `https://api.github.com/repos/acme/web/statuses/${sha}`);
  assert.deepEqual(req.body, { state: "success", context: "flowsvc/deploy" });
  assert.match(
    refusal(() => m.request({ credential: "gh", with: { owner: "acme", repo: "web", sha, state: "done" } })),
    /with\.state: must be one of error, failure, pending, success; got "done"/,
  );
  // A path parameter cannot climb out of its segment.
  assert.match(
    refusal(() => m.request({ credential: "gh", with: { owner: "..%2f..", repo: "web", sha, state: "success" } })),
    /with\.owner/,
  );
  assert.match(
    refusal(() => m.request({ credential: "gh", with: { owner: "acme", repo: "web/../x", sha, state: "success" } })),
    /with\.repo/,
  );
  assert.match(
    refusal(() => m.request({ credential: "gh", with: { owner: "acme", repo: "web", sha: "main", state: "success" } })),
    /with\.sha/,
  );
  // A dot segment is not a name: the URL parser would resolve it (`/repos/../../statuses` is `/statuses`),
  // taking the token out of the base URL's path (`https://ghe.corp/api/v3` -> `https://ghe.corp/api/...`).
  const ghe = { baseUrls: { github: "https://ghe.corp/api/v3" } };
  for (const [owner, repo] of [
    ["..", ".."],
    ["acme", ".."],
    ["..", "web"],
    [".", "web"],
    ["acme", "."],
  ] as const) {
    assert.match(
      refusal(() => m.request({ credential: "gh", with: { owner, repo, sha, state: "success" } }, ghe)),
      /with\.(owner|repo): "\.{1,2}" is a dot segment, not a name/,
      `${owner}/${repo}`,
    );
  }
  assert.equal(
    m.request({ credential: "gh", with: { owner: "acme", repo: "web.js", sha, state: "success" } }, ghe).url,
    `https://ghe.corp/api/v3/repos/acme/web.js/statuses/${sha}`,
  );
});

void test("bad config is refused with every problem, each named by its path", () => {
  const problems = connectorConfigProblems(
    manifest("anthropic.messages"),
    { with: { max_tokens: Number("1e400") }, input: 3, colour: "red", headers: { Host: "evil", "x-a": "a\r\nb: c" } },
    "nodes[1].config",
  );
  assert.deepEqual(problems, [
    "nodes[1].config.colour: not an anthropic.messages setting (credential, with, input, headers)",
    "nodes[1].config.credential: required: anthropic.messages needs a credential of kind api-key",
    "nodes[1].config.with.model: required",
    "nodes[1].config.with.max_tokens: must be a whole number",
    "nodes[1].config.input: must be a string",
    'nodes[1].config.headers["Host"]: frames the request and cannot be set',
    'nodes[1].config.headers["x-a"]: holds a control character or is over 8192 characters',
  ]);
});

void test("hostile strings are refused: NUL, lone surrogates, over 1 MiB", () => {
  const m = manifest("anthropic.messages");
  const base = { credential: "c", with: { model: "m", max_tokens: 5 } };
  assert.match(
    refusal(() => m.request({ ...base, input: "a\u0000b" })),
    /input: holds a NUL/,
  );
  assert.match(
    refusal(() => m.request({ ...base, input: "\ud800" })),
    /input: holds a lone UTF-16 surrogate/,
  );
  assert.match(
    refusal(() => m.request({ ...base, input: "x".repeat(1024 * 1024 + 1) })),
    /input: is 1048577 characters long/,
  );
  assert.match(
    refusal(() => m.request({ ...base, with: { model: "m\u0000", max_tokens: 5 }, input: "x" })),
    /with\.model: holds a NUL/,
  );
  assert.match(
    refusal(() => m.request({ ...base, with: { model: "m", max_tokens: 0 }, input: "x" })),
    /max_tokens: must be from 1/,
  );
});

void test("unevaluated $expr/$template values are not judged before dispatch", () => {
  const problems = connectorConfigProblems(manifest("anthropic.messages"), {
    credential: { $expr: "input.cred" },
    with: { model: { $expr: "input.model" }, max_tokens: 10 },
    input: { $template: "Review {{ input.diff }}" },
  });
  assert.deepEqual(problems, []);
});

void test("base URL overrides: known providers, https or a local http peer, nothing else", () => {
  assert.deepEqual(parseConnectorBaseUrls('{"anthropic":"http://127.0.0.1:8123/","slack":"https://slack.example"}'), {
    anthropic: "http://127.0.0.1:8123",
    slack: "https://slack.example",
  });
  assert.deepEqual(parseConnectorBaseUrls(undefined), {});
  assert.deepEqual(parseConnectorBaseUrls(""), {});
  assert.match(
    refusal(() => parseConnectorBaseUrls("{not json")),
    /must be a JSON object/,
  );
  assert.match(
    refusal(() => parseConnectorBaseUrls('{"openai":"https://x"}')),
    /FLOWSVC_CONNECTOR_BASE_URLS\.openai: no connector provider/,
  );
  assert.match(
    refusal(() => parseConnectorBaseUrls('{"anthropic":"http://evil.example"}')),
    /must be https/,
  );
  assert.match(
    refusal(() => parseConnectorBaseUrls('{"anthropic":"https://u:p@x.example"}')),
    /no query, fragment or user/,
  );
  assert.match(
    refusal(() => parseConnectorBaseUrls('{"__proto__":"https://x"}')),
    /no connector provider/,
  );
});
