/**
 * Hostile input on every surface that writes (issue 14, item 5 and the smaller 413/414/431 line):
 * a NUL byte, a lone surrogate, JSON nested 5,000 and 100,000 deep, percent-encoded NUL and broken
 * percent-encoding in paths and queries, an out-of-range rerun site. Each must be a 400 (or 413)
 * in the one error shape, naming where, with no row written: senders such as GitHub retry a 5xx
 * forever. Requests go over HTTP to a real `flow server`; the rows are counted in its Postgres.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { request } from "undici";
import { JSON_DEPTH_LIMIT, MAX_STEP_ORDINAL } from "@flowsvc/core";
import { rawRequest as rawHttp } from "./support/raw-http.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

const scoped = "/api/v1/orgs/default/projects/default";
const GITHUB_KEY = "bad-input-github-key";
const COUNTED = ["runs", "jobs", "events", "handlers", "signals", "event_hooks"] as const;

let server: TestServer;
let db: pg.Pool;
let runId: string;
let hookSecret: string;

interface Answer {
  status: number;
  text: string;
  error: { code?: string; message?: string; details?: Record<string, unknown> } | undefined;
}

/** A raw request: the user token unless `auth` is false, JSON content type when there is a body. */
const send = async (
  method: "GET" | "PUT" | "POST",
  path: string,
  body?: string | Buffer,
  { headers = {}, auth = true }: { headers?: Record<string, string>; auth?: boolean } = {},
): Promise<Answer> => {
  const res = await request(`${server.url}${path}`, {
    method,
    headers: {
      ...(auth ? { authorization: `Bearer ${server.token}` } : {}),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    body: body ?? null,
  });
  const text = await res.body.text();
  let error: Answer["error"];
  try {
    error = (JSON.parse(text) as { error?: Answer["error"] }).error;
  } catch {
    error = undefined;
  }
  return { status: res.statusCode, text, error };
};

const counts = async (): Promise<Record<string, number>> => {
  const out: Record<string, number> = {};
  for (const t of COUNTED) out[t] = Number((await db.query<{ n: string }>(`select count(*) as n from ${t}`)).rows[0]!.n);
  return out;
};

/** `[[[...]]]` `depth` deep, as JSON text (JSON.stringify itself would overflow building it). */
const deepArray = (depth: number): string => "[".repeat(depth) + "]".repeat(depth);
const deepObject = (depth: number): string => '{"a":'.repeat(depth) + "1" + "}".repeat(depth);

const NUL = "x\\u0000y";
const SURROGATE = "x\\ud800y";
const sign = (raw: string): string => `sha256=${createHmac("sha256", GITHUB_KEY).update(raw).digest("hex")}`;

before(async () => {
  server = await startTestServer({ agents: 1 });
  db = new pg.Pool({ connectionString: server.databaseUrl, max: 2 });
  const tok = JSON.parse((await server.cli(["event-hook", "set", "tok", "--event-type", "tok.ping", "-o", "json"])).stdout) as {
    secret: string;
  };
  hookSecret = tok.secret;
  assert.equal((await server.cli(["event-hook", "set", "gh", "--manifest", "github", "--key", GITHUB_KEY])).code, 0);
  const submitted = await send("POST", `${scoped}/runs`, JSON.stringify({ kind: "script", source: "echo hello\n", filename: "hello.sh" }));
  assert.equal(submitted.status, 201, submitted.text);
  runId = (JSON.parse(submitted.text) as { id: string }).id;
  // The seed run must be over before rows are counted: a finishing run writes rows of its own.
  await waitFor("the seed run to finish", async () => {
    const { rows } = await db.query<{ status: string }>("select status from runs where id = $1", [runId]);
    return rows[0]?.status === "succeeded";
  });
});

after(async () => {
  await db?.end();
  await server?.stop();
});

interface Case {
  name: string;
  method: "GET" | "PUT" | "POST";
  path: () => string;
  body?: () => string;
  headers?: () => Record<string, string>;
  auth?: boolean;
  /** What the message must name: the field or parameter. */
  where: string | RegExp;
  status?: number;
  code?: string;
}

const runBody = (patch: string): string => `{"kind":"script","source":"echo hi","filename":"a.sh",${patch}}`;
const hookPath = (name: string): string => `/api/v1/hooks/default/default/${name}`;
const githubCase = (name: string, raw: string, where: string): Case => ({
  name: `signed github delivery: ${name}`,
  method: "POST",
  path: () => hookPath("gh"),
  body: () => raw,
  headers: () => ({ "x-hub-signature-256": sign(raw), "x-github-event": "issues", "x-github-delivery": `d-${name}` }),
  auth: false,
  where,
});
const tokenHookCase = (name: string, raw: string, where: string): Case => ({
  name: `token hook delivery: ${name}`,
  method: "POST",
  path: () => hookPath("tok"),
  body: () => raw,
  headers: () => ({ "x-flow-hook-secret": hookSecret }),
  auth: false,
  where,
});

const CASES: Case[] = [
  {
    name: "run source with NUL",
    method: "POST",
    path: () => `${scoped}/runs`,
    body: () => `{"kind":"script","source":"${NUL}","filename":"a.sh"}`,
    where: "body.source",
  },
  {
    name: "run env value with NUL",
    method: "POST",
    path: () => `${scoped}/runs`,
    body: () => runBody(`"env":{"A":"${NUL}"}`),
    where: "body.env.A",
  },
  {
    name: "run env name with NUL",
    method: "POST",
    path: () => `${scoped}/runs`,
    body: () => runBody(`"env":{"${NUL}":"v"}`),
    where: "body.env[",
  },
  {
    name: "run tag with NUL",
    method: "POST",
    path: () => `${scoped}/runs`,
    body: () => runBody(`"tags":["ok","${NUL}"]`),
    where: "body.tags[1]",
  },
  {
    name: "run idempotency key with NUL",
    method: "POST",
    path: () => `${scoped}/runs`,
    body: () => runBody(`"idempotency_key":"${NUL}"`),
    where: "body.idempotency_key",
  },
  {
    name: "run env nested 5,000 deep",
    method: "POST",
    path: () => `${scoped}/runs`,
    body: () => runBody(`"env":{"A":${deepArray(5000)}}`),
    where: "body.env.A",
  },
  {
    name: "emit key with NUL",
    method: "POST",
    path: () => `${scoped}/events`,
    body: () => `{"type":"a.b","key":"${NUL}"}`,
    where: "body.key",
  },
  {
    name: "emit payload with a lone surrogate",
    method: "POST",
    path: () => `${scoped}/events`,
    body: () => `{"type":"a.b","payload":{"m":["ok","${SURROGATE}"]}}`,
    where: "body.payload.m[1]",
  },
  {
    name: "emit payload key with a lone surrogate",
    method: "POST",
    path: () => `${scoped}/events`,
    body: () => `{"type":"a.b","payload":{"${SURROGATE}":1}}`,
    where: "body.payload[",
  },
  {
    name: "emit payload nested 5,000 deep",
    method: "POST",
    path: () => `${scoped}/events`,
    body: () => `{"type":"a.b","payload":${deepArray(5000)}}`,
    where: "body.payload",
  },
  {
    name: "emit payload nested 100,000 deep",
    method: "POST",
    path: () => `${scoped}/events`,
    body: () => `{"type":"a.b","payload":${deepObject(100_000)}}`,
    where: "body.payload.a.a",
  },
  {
    name: "signal payload with a lone surrogate",
    method: "POST",
    path: () => `${scoped}/runs/${runId}/signals/go`,
    body: () => `{"payload":"${SURROGATE}"}`,
    where: "body.payload",
  },
  {
    name: "signal payload with NUL",
    method: "POST",
    path: () => `${scoped}/runs/${runId}/signals/go`,
    body: () => `{"payload":{"v":"${NUL}"}}`,
    where: "body.payload.v",
  },
  {
    name: "signal payload nested 5,000 deep",
    method: "POST",
    path: () => `${scoped}/runs/${runId}/signals/go`,
    body: () => `{"payload":${deepObject(5000)}}`,
    where: "body.payload.a",
  },
  {
    name: "handler source with NUL",
    method: "PUT",
    path: () => `${scoped}/handlers/h1`,
    body: () => `{"on":["a.b"],"reaction":{"kind":"script","source":"${NUL}","filename":"h.sh"}}`,
    where: "body.reaction.source",
  },
  {
    name: "handler tag with NUL",
    method: "PUT",
    path: () => `${scoped}/handlers/h1`,
    body: () => `{"on":["a.b"],"reaction":{"kind":"script","source":"echo","filename":"h.sh"},"tags":["${NUL}"]}`,
    where: "body.tags[0]",
  },
  {
    name: "rerun site with NUL",
    method: "POST",
    path: () => `${scoped}/runs/${runId}/rerun`,
    body: () => `{"from":"greet${"\\u0000"}#1"}`,
    where: "body.from",
  },
  {
    name: "rerun site past a Postgres integer",
    method: "POST",
    path: () => `${scoped}/runs/${runId}/rerun`,
    body: () => '{"from":"greet#99999999999999999999"}',
    where: String(MAX_STEP_ORDINAL),
  },
  {
    name: "rerun site one past a Postgres integer",
    method: "POST",
    path: () => `${scoped}/runs/${runId}/rerun`,
    body: () => `{"from":"greet#${MAX_STEP_ORDINAL + 1}"}`,
    where: "--from greet#2147483648",
  },
  tokenHookCase("body with NUL", `{"a":"${NUL}"}`, "body.a"),
  tokenHookCase("body with a lone surrogate", `{"a":{"b":"${SURROGATE}"}}`, "body.a.b"),
  tokenHookCase("body nested 5,000 deep", deepArray(5000), "body[0]"),
  githubCase("lone surrogate", `{"action":"opened","issue":{"title":"${SURROGATE}"},"repository":{"full_name":"a/b"}}`, "body.issue.title"),
  githubCase("NUL", `{"action":"opened","issue":{"title":"${NUL}"},"repository":{"full_name":"a/b"}}`, "body.issue.title"),
  githubCase("nested 5,000 deep", `{"action":"opened","issue":${deepObject(5000)},"repository":{"full_name":"a/b"}}`, "body.issue.a"),
  { name: "path segment with %00", method: "GET", path: () => `${scoped}/runs/run-%00x`, where: "path parameter id" },
  {
    name: "signal name with %00",
    method: "POST",
    path: () => `${scoped}/runs/${runId}/signals/go%00`,
    body: () => "{}",
    where: "path parameter name",
  },
  { name: "handler name with %00", method: "PUT", path: () => `${scoped}/handlers/h%00`, body: () => "{}", where: "path parameter name" },
  { name: "path segment that is not UTF-8", method: "GET", path: () => `${scoped}/runs/run-%ED%A0%80`, where: "/runs/run-%ED%A0%80" },
  { name: "query value with %00", method: "GET", path: () => `${scoped}/runs?tag=a%00b`, where: 'query parameter "tag"' },
  { name: "query name with %00", method: "GET", path: () => `${scoped}/runs?ta%00g=1`, where: 'query parameter "ta%00g"' },
  { name: "query with broken percent-encoding", method: "GET", path: () => `${scoped}/runs?tag=a%zz`, where: 'query parameter "tag"' },
  {
    name: "hook query with %00",
    method: "POST",
    path: () => `${hookPath("tok")}?ref=a%00`,
    body: () => "{}",
    headers: () => ({ "x-flow-hook-secret": hookSecret }),
    auth: false,
    where: 'query parameter "ref"',
  },
];

/** The answer is the case's refusal (400 invalid_argument unless it says otherwise) and names where. */
const assertRefused = (res: Answer, c: Case): void => {
  assert.equal(res.status, c.status ?? 400, res.text);
  assert.equal(res.error?.code, c.code ?? "invalid_argument", res.text);
  const message = res.error?.message ?? "";
  if (typeof c.where === "string") assert.ok(message.includes(c.where), `the message names ${c.where}: ${message}`);
  else assert.match(message, c.where);
};

for (const c of CASES) {
  void test(`hostile input is a 400 that names where, and writes nothing: ${c.name}`, async () => {
    const before = await counts();
    const res = await send(c.method, c.path(), c.body?.(), { headers: c.headers?.(), auth: c.auth });
    assertRefused(res, c);
    assert.deepEqual(await counts(), before, "no row was written");
  });
}

void test("a body nested deeper than the limit is refused, one level less is taken", async () => {
  const deep = (depth: number): string => `{"type":"depth.probe","payload":${deepArray(depth - 1)}}`;
  const over = await send("POST", `${scoped}/events`, deep(JSON_DEPTH_LIMIT + 1));
  assert.equal(over.status, 400, over.text);
  assert.match(over.error?.message ?? "", new RegExp(`nested more than ${JSON_DEPTH_LIMIT} levels deep`));
  const at = await send("POST", `${scoped}/events`, deep(JSON_DEPTH_LIMIT));
  assert.equal(at.status, 201, at.text);
});

void test("an unauthenticated hook delivery with a hostile body still gets its 401 first", async () => {
  const before = await counts();
  const raw = `{"a":"${NUL}"}`;
  const noSecret = await send("POST", hookPath("tok"), raw, { auth: false });
  assert.equal(noSecret.status, 401, noSecret.text);
  const unsigned = await send("POST", hookPath("gh"), raw, {
    headers: { "x-github-event": "issues", "x-github-delivery": "d-unsigned" },
    auth: false,
  });
  assert.equal(unsigned.status, 401, unsigned.text);
  const badSignature = await send("POST", hookPath("gh"), deepArray(5000), {
    headers: { "x-hub-signature-256": sign("other"), "x-github-event": "issues", "x-github-delivery": "d-bad" },
    auth: false,
  });
  assert.equal(badSignature.status, 401, badSignature.text);
  assert.deepEqual(await counts(), before);
});

void test("the CLI shows the server's 400 for a script file holding a NUL byte", async () => {
  const file = join(server.dataDir, "nul.sh");
  await writeFile(file, "echo a\0b\n");
  const before = await counts();
  const res = await server.cli(["submit", file]);
  assert.equal(res.code, 2, res.stderr);
  assert.match(res.stderr, /body\.source holds a NUL character/);
  assert.deepEqual(await counts(), before);
});

void test("an overlong path segment is a 414 in the one error shape", async () => {
  const res = await send("GET", `${scoped}/runs/${"r".repeat(300)}`);
  assert.equal(res.status, 414, res.text);
  assert.equal(res.error?.code, "uri_too_long");
  assert.match(res.error?.message ?? "", /over 100 characters/);
});

/** Node's HTTP parser answers oversized headers itself, before Fastify: this reads its raw answer. */
const rawRequest = (text: string): Promise<string> => rawHttp(server.url, text);

void test("oversized headers and an oversized URL are 431s with a JSON body in the one error shape", async () => {
  for (const [what, text] of [
    ["a header", `GET /api/v1/whoami HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`],
    ["the URL", `GET ${scoped}/runs?tag=${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`],
  ] as const) {
    const answer = await rawRequest(text);
    assert.match(answer, /^HTTP\/1\.1 431 /, `${what}: ${answer.slice(0, 200)}`);
    assert.match(answer, /content-type: application\/json/i);
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { error: { code: string; message: string } };
    assert.equal(body.error.code, "headers_too_large");
    assert.match(body.error.message, /over 16 KiB/);
  }
});

void test("a body over the limit is a 413 that states the size and the limit", async () => {
  // The server decides on Content-Length before it reads the body, and closes once it answered: a
  // client still writing the 3 MiB would race that close (EPIPE) and might never read the answer,
  // so this one declares the size and waits for the answer without writing the body.
  const size = 3 * 1024 * 1024;
  const answer = await rawRequest(
    `POST ${scoped}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.token}\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\nConnection: close\r\n\r\n`,
  );
  assert.match(answer, /^HTTP\/1\.1 413 /, answer.slice(0, 300));
  const error = (JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { error: NonNullable<Answer["error"]> }).error;
  assert.equal(error.code, "payload_too_large");
  assert.match(
    error.message ?? "",
    /the request body is 3 MiB; the limit for POST \/api\/v1\/orgs\/default\/projects\/default\/events is 2 MiB/,
  );
  assert.equal(error.details?.["limit_bytes"], 2 * 1024 * 1024);
});

void test("a hook secret never reaches server.log, however its query parameter is spelled", async () => {
  const logFile = join(server.dataDir, "server.log");
  const refusals = async (): Promise<number> =>
    (await readFile(logFile, "utf8")).split("\n").filter((l) => l.includes("hook delivery refused")).length;
  const wrong = "fhs_wrongWrongWrong0123456789abcdefABCDEF";
  const spellings = (s: string): string[] => [
    `secret=${s}`,
    `%73ecret=${s}`,
    `SECRET=${s}`,
    `%53ecret=${s}`,
    `s%65cret=${s}`,
    `%2573ecret=${s}`,
    `a=1&secret=${s}`,
    `a=1;secret=${s}`,
    `secret=${s};b=2`,
    `secret=${s}%23frag`,
    `a=1&%73ecret=${s}&b=2`,
  ];
  const base = await refusals();
  let sent = 0;
  // The right secret of `tok` is a wrong one for `gh`; `wrong` is wrong for both. Each is refused and logged.
  for (const [hook, s] of [
    ["gh", hookSecret],
    ["tok", wrong],
  ] as const) {
    for (const q of spellings(s)) {
      const res = await send("POST", `${hookPath(hook)}?${q}`, "{}", {
        headers: hook === "gh" ? { "x-github-event": "ping", "x-github-delivery": `d-${sent}` } : {},
        auth: false,
      });
      if (res.status !== 401) continue; // a spelling the server does not read as the secret may be refused for another reason
      sent++;
    }
    // Fragments and `#` reach the server only from raw clients.
    for (const q of [`a=1#secret=${s}`, `secret=${s}#x`, `x=1#&%73ecret=${s}`]) {
      const answer = await rawRequest(
        `POST ${hookPath(hook)}?${q} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
      );
      if (/^HTTP\/1\.1 401 /.test(answer)) sent++;
    }
  }
  assert.ok(sent >= 20, `most spellings were refused and logged (${sent})`);
  await waitFor("every refused delivery to be logged", async () => (await refusals()) - base >= sent);
  const log = await readFile(logFile, "utf8");
  assert.ok(!log.includes(hookSecret), "the hook's secret is not in server.log");
  assert.ok(!log.includes(wrong), "a wrong secret is not in server.log either");
  assert.match(log, /"url":"[^"]*%73ecret=\[redacted\][^"]*".*"msg":"hook delivery refused"/);
  // The percent-encoded name is still read as the secret: the right one is taken.
  const ok = await send("POST", `${hookPath("tok")}?%73ecret=${hookSecret}`, "{}", { auth: false });
  assert.equal(ok.status, 202, ok.text);
});
