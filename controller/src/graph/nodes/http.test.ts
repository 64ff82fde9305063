/**
 * The http executor against a local peer: request shape, credentials by kind, precedence, caps,
 * timeouts, failures, and the egress guard (a destination the policy refuses fails the node and
 * the peer sees nothing; redirects are answers, never followed).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Agent } from "undici";
import { FlowError, type CredentialValue } from "@flowsvc/core";
import { createEgressAgent } from "../../net/egress-agent.js";
import { defaultEgressPolicy } from "../../net/egress-policy.js";
import { RESPONSE_LIMIT, httpExecutor } from "./http.js";
import type { NodeContext, NodeOutcome } from "./types.js";

let server: Server;
let base = "";
const seen: Array<{ method: string; url: string; headers: IncomingHttpHeaders; body: string }> = [];

before(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString() });
      if (req.url === "/text") return void res.writeHead(200, { "content-type": "text/plain" }).end("plain words");
      if (req.url === "/badjson") return void res.writeHead(200, { "content-type": "application/json" }).end("{not json");
      if (req.url === "/huge") return void res.writeHead(200).end(Buffer.alloc(RESPONSE_LIMIT + 1, 97));
      if (req.url === "/redirect")
        return void res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/iam/security-credentials/" }).end();
      if (req.url === "/slow") return; // never answered: only the caller's timeout or abort ends it (after() closes the socket)
      if (req.url === "/teapot")
        return void res.writeHead(418, { "content-type": "application/problem+json" }).end('{"title":"short and stout"}');
      res.writeHead(200, { "content-type": "application/json; charset=utf-8", "x-peer": "yes" }).end(JSON.stringify({ ok: true }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  await Promise.all([local.close(), strict.close()]);
  server.closeAllConnections();
  server.close();
});

const CREDENTIALS: Record<string, CredentialValue> = {
  tok: { kind: "bearer", token: "T0k" },
  key: { kind: "api_key", header: "x-api-key", value: "K3y" },
  basic: { kind: "basic", username: "ci", password: "pw" },
  url: { kind: "url_token", token: "a/b?c" },
};

/** Local mode's default (the peer on 127.0.0.1 may be reached) and Kubernetes mode's (loopback refused). */
const local: Agent = createEgressAgent(defaultEgressPolicy("local"));
const strict: Agent = createEgressAgent(defaultEgressPolicy("kubernetes"));

const run = (config: unknown, signal = new AbortController().signal, egress: Agent = local): Promise<NodeOutcome> =>
  httpExecutor.start({
    node: { id: "call", type: "http", config: {} },
    config,
    signal,
    egress,
    credential: (name: string) => {
      const value = CREDENTIALS[name];
      if (!value) return Promise.reject(new FlowError("invalid_argument", `credential "${name}" is not set in this project`));
      return Promise.resolve({ name, value, masks: [] });
    },
  } as unknown as NodeContext);

const last = (): (typeof seen)[number] => seen.at(-1)!;

void test("a JSON body is sent as JSON with its content type; the JSON answer is parsed; status and headers come back", async () => {
  const o = await run({ url: `${base}/x`, method: "post", body: { a: [1, "two"] }, headers: { "x-trace": "1" } });
  assert.equal(o.kind, "succeeded");
  const out = (o.kind === "succeeded" ? o.output : {}) as { status: number; headers: Record<string, string>; body: unknown };
  assert.deepEqual([out.status, out.headers["x-peer"], out.body], [200, "yes", { ok: true }]);
  assert.deepEqual(
    [last().method, last().headers["content-type"], last().headers["x-trace"], last().body],
    ["POST", "application/json", "1", '{"a":[1,"two"]}'],
  );
  await run({ url: `${base}/raw`, method: "PUT", body: "as is", headers: { "Content-Type": "text/csv" } });
  assert.deepEqual([last().headers["content-type"], last().body], ["text/csv", "as is"]);
});

void test("each credential kind becomes its auth; an explicit header wins; url-token is one encoded path part", async () => {
  await run({ url: `${base}/b`, credential: "tok" });
  assert.equal(last().headers.authorization, "Bearer T0k");
  await run({ url: `${base}/k`, credential: "key" });
  assert.equal(last().headers["x-api-key"], "K3y");
  await run({ url: `${base}/c`, credential: "basic" });
  assert.equal(last().headers.authorization, `Basic ${Buffer.from("ci:pw").toString("base64")}`);
  await run({ url: `${base}/u/{credential}`, credential: "url" });
  assert.equal(last().url, "/u/a%2Fb%3Fc");
  await run({ url: `${base}/e`, credential: "tok", headers: { Authorization: "Mine" } });
  assert.equal(last().headers.authorization, "Mine");
  await run({ url: `${base}/e2`, credential: "key", headers: { "X-API-KEY": "override" } });
  assert.equal(last().headers["x-api-key"], "override");
});

void test("fail closed: an unknown credential, or a url-token without {credential}, sends nothing", async () => {
  const before = seen.length;
  await assert.rejects(run({ url: `${base}/nope`, credential: "ghost" }), /credential "ghost" is not set/);
  await assert.rejects(run({ url: `${base}/no-placeholder`, credential: "url" }), /has no \{credential\}/);
  await assert.rejects(run({ url: "file:///etc/passwd" }), /only http and https/);
  await assert.rejects(run({ url: `${base}/m`, method: "GET\r\nX: y" }), /is not one of GET, HEAD/);
  await assert.rejects(run({ url: 42 }), /config\.url: must be a string/);
  await assert.rejects(run({ url: `${base}/h`, headers: { a: 1 } }), /config\.headers\.a: must be a string/);
  assert.equal(seen.length, before);
});

void test("non-2xx fails the attempt and keeps the output; text stays text; bad JSON stays text", async () => {
  const o = await run({ url: `${base}/teapot` });
  assert.equal(o.kind, "failed");
  assert.match(o.kind === "failed" ? o.error : "", /answered HTTP 418/);
  assert.deepEqual(o.kind === "failed" && (o.output as { status: number; body: unknown }).body, { title: "short and stout" });
  const text = await run({ url: `${base}/text` });
  assert.equal(text.kind === "succeeded" && (text.output as { body: unknown }).body, "plain words");
  const bad = await run({ url: `${base}/badjson` });
  assert.equal(bad.kind === "succeeded" && (bad.output as { body: unknown }).body, "{not json");
});

void test("a response over the cap fails; a timeout fails naming it; an abort (cancel) ends the request", async () => {
  const huge = await run({ url: `${base}/huge` });
  assert.match(huge.kind === "failed" ? huge.error : "", /over 4194304 bytes/);
  await assert.rejects(run({ url: `${base}/slow`, timeout: "100ms" }), /timed out after 100 ms/);
  const ac = new AbortController();
  const p = run({ url: `${base}/slow` }, ac.signal);
  ac.abort();
  await assert.rejects(p);
  await assert.rejects(run({ url: `${base}/x`, timeout: "11m" }), /config\.timeout: at most 600s/);
});

void test("private refused: a name resolving to loopback fails the node with why, naming no path, query or credential, and no retry; the peer sees nothing", async () => {
  const before = seen.length;
  const url = `http://localhost:${new URL(base).port}/latest/meta-data/{credential}?q=hidden-query`;
  const refused = await run({ url, credential: "url" }, undefined, strict);
  // Final: the retry policy does not apply (the same address would be refused again).
  assert.ok(refused.kind === "failed" && refused.final === true, JSON.stringify(refused));
  const err = { message: refused.error };
  assert.match(
    err.message,
    /^config\.url: localhost resolves to (127\.0\.0\.1|::1), a loopback address; http nodes may not reach loopback addresses here \(set FLOWSVC_HTTP_ALLOW_CIDRS or FLOWSVC_HTTP_ALLOW_PRIVATE\); nothing was sent$/,
  );
  for (const leak of ["meta-data", "hidden-query", "a%2Fb", "a/b?c"]) assert.ok(!err.message.includes(leak), leak);
  const metadata = await run({ url: "http://[::ffff:a9fe:a9fe]/latest/meta-data/" });
  assert.match(metadata.kind === "failed" ? metadata.error : "", /cloud instance metadata address/);
  assert.equal(seen.length, before, "no request reached the peer");
  // The same node under local mode's default goes through.
  const o = await run({ url, credential: "url" });
  assert.equal(o.kind, "succeeded");
  assert.equal(seen.length, before + 1);
});

void test("a redirect is the answer, never followed (not even to the metadata address); a URL that does not parse sends nothing", async () => {
  const before = seen.length;
  const o = await run({ url: `${base}/redirect` });
  assert.equal(o.kind, "failed");
  assert.match(o.kind === "failed" ? o.error : "", /answered HTTP 302/);
  assert.equal(seen.length, before + 1);
  for (const url of [
    `${base}\u0000/x`,
    "http://127.0.0.1:99999/",
    "http://[::1/",
    "//127.0.0.1/",
    `${base.replace("127.0.0.1", "127.0.0.1.5")}/x`,
  ])
    await assert.rejects(run({ url }), /^Error: config\.url: is not an absolute http\(s\) URL$/, url);
  assert.equal(seen.length, before + 1);
});

void test("a method or header an expression yields is held to the check's rules: one of the seven methods, no line break or NUL; nothing is sent", async () => {
  const before = seen.length;
  for (const method of ["TRACE", "CONNECT", "PROPFIND"])
    await assert.rejects(
      run({ url: `${base}/x`, method }),
      new RegExp(`^Error: config\\.method: "${method}" is not one of GET, HEAD, POST`),
      method,
    );
  for (const value of ["a\nb", "a\rb", "a\u0000b"])
    await assert.rejects(
      run({ url: `${base}/x`, headers: { "x-a": value } }),
      /^Error: config\.headers\.x-a: a header value cannot hold a line break or NUL$/,
      JSON.stringify(value),
    );
  assert.equal(seen.length, before);
  const o = await run({ url: `${base}/x`, method: "PATCH", headers: { "x-a": "ok" } });
  assert.equal(o.kind, "succeeded", JSON.stringify(o));
});
