import assert from "node:assert/strict";
import { test } from "node:test";
import { answerError, createApiClient, networkError, withQuery } from "./http.js";
import type { FlowError } from "@flowsvc/core/errors";

const URL_ = "http://127.0.0.1:8080";

void test("a flowsvc error body comes back as its FlowError, hint included", () => {
  const err = answerError(
    { url: URL_, method: "GET", path: "/x" },
    409,
    JSON.stringify({ error: { code: "conflict", message: "busy", hint: "retry" } }),
  );
  assert.deepEqual([err.code, err.message, err.hint], ["conflict", "busy", "retry"]);
});

void test("a 401 always says how to log in", () => {
  const err = answerError({ url: URL_, method: "GET", path: "/x" }, 401, "");
  assert.equal(err.code, "unauthenticated");
  assert.match(err.hint ?? "", /^run `flow login --url http:\/\/127\.0\.0\.1:8080 --token <token>` or set FLOWSVC_TOKEN/);
});

void test("a 404 without a flowsvc body names the missing route", () => {
  const err = answerError(
    { url: URL_, method: "POST", path: "/api/v1/orgs/a/projects/b/events?x=1" },
    404,
    '{"message":"Route not found","statusCode":404}',
  );
  assert.equal(err.code, "not_found");
  assert.equal(err.message, `flowsvc at ${URL_} has no route POST /api/v1/orgs/a/projects/b/events`);
});

void test("connection refused is `unavailable` with the URL and a hint to start the server", async () => {
  const api = createApiClient({ url: "http://127.0.0.1:1", token: "" });
  await assert.rejects(
    api.call("GET", "/api/v1/whoami"),
    (e: Error & { code?: string; hint?: string }) =>
      e.code === "unavailable" && e.message === "cannot reach flowsvc at http://127.0.0.1:1" && /npm start/.test(e.hint ?? ""),
  );
  await api.close();
  assert.match(networkError(URL_, Object.assign(new Error("socket hang up"), { code: "ECONNRESET" })).message, /lost the connection/);
});

void test("a query string carries only the values given", () => {
  assert.equal(withQuery("/runs", { status: "failed", tag: undefined, limit: 5 }), "/runs?status=failed&limit=5");
  assert.equal(withQuery("/runs", {}), "/runs");
});

void test("a body too deep to serialise is refused as such before anything is sent, not as a lost connection", async () => {
  // `flow graph set g deep.json`, `--input`/`--payload` JSON nested past what JSON.stringify's recursion takes.
  let deep: unknown = [];
  for (let i = 0; i < 100_000; i++) deep = [deep];
  for (const call of [0, 1]) {
    const client = createApiClient({ url: "http://127.0.0.1:1", token: "t" });
    // The first call goes by hand (http1.ts), a later one through node:http: both serialise the same way.
    if (call === 1) await client.call("GET", "/x").catch(() => undefined);
    await assert.rejects(client.call("PUT", "/x", { document: deep }), (err: FlowError) => {
      assert.equal(err.code, "invalid_argument", err.message);
      assert.match(err.message, /^the request body nests too deep to send as JSON/);
      return true;
    });
    await client.close();
  }
});
