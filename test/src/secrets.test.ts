/**
 * Secrets as SECURITY.md promises them: masked on the byte stream in the live log and the stored
 * log however the script writes them, absent from every API response, injected with workflow env
 * winning, and guarded by roles. Also the lifecycle events and the sealed step environment.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { request } from "undici";
import { createUserWithToken, findProject, mintId, mintToken, type Role } from "@flowsvc/store";
import { startTestServer, type TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";

const SECRET = "s3cr3t-Välue-€-4711";
const MULTILINE = "line-one-alpha\nline-two-beta\nxy";

let server: TestServer;
let dir: string;

before(async () => {
  server = await startTestServer();
  dir = await scriptDir("flowsvc-secrets-");
  assert.equal((await server.cli(["secret", "set", "API_TOKEN", SECRET])).code, 0);
  assert.equal((await server.cli(["secret", "set", "CERT", "-"], { input: MULTILINE + "\n" })).code, 0);
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const api = async (path: string, token = server.token, init: { method?: "GET" | "PUT" | "POST" | "DELETE"; body?: unknown } = {}) => {
  const res = await request(`${server.url}${path}`, {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${token}`, ...(init.body !== undefined ? { "content-type": "application/json" } : {}) },
    body: init.body !== undefined ? JSON.stringify(init.body) : null,
  });
  return { status: res.statusCode, text: await res.body.text() };
};

const scoped = "/api/v1/orgs/default/projects/default";

void test("a secret printed whole, split across writes, byte by byte and after a pause is *** live and in the stored log", async () => {
  const file = join(dir, "leak.sh");
  await writeFile(
    file,
    [
      'echo "whole: $API_TOKEN"',
      'printf "%s" "${API_TOKEN:0:4}"; printf "%s\\n" "${API_TOKEN:4}"',
      'printf "%s" "${API_TOKEN:0:9}"; sleep 0.3; printf "%s\\n" "${API_TOKEN:9}"',
      `python3 -c 'import os,sys; v=os.environ["API_TOKEN"].encode(); [(sys.stdout.buffer.write(bytes([b])), sys.stdout.flush()) for b in v]; print()'`,
      'echo "cert: $CERT"',
      'echo "to stderr: $API_TOKEN" >&2',
      'echo "derived length ${#API_TOKEN} is not masked"',
    ].join("\n") + "\n",
  );
  const live = await server.cli(["submit", file, "--follow"]);
  assert.equal(live.code, 0, live.stderr);
  const run = /run-[0-9a-z]{26}/.exec(live.stderr)![0];
  const stored = await server.cli(["follow", run]);
  for (const [what, text] of [
    ["live", live.stdout],
    ["stored", stored.stdout],
  ] as const) {
    assert.ok(!text.includes(SECRET), `${what} log shows the secret`);
    for (const part of ["s3cr", "Välue", "4711", "line-one-alpha", "line-two-beta"])
      assert.ok(!text.includes(part), `${what} log shows "${part}"`);
    assert.match(text, /whole: \*\*\*/);
    assert.ok((text.match(/\*\*\*/g) ?? []).length >= 6, `${what}: ${text}`);
    assert.match(text, /derived length 19 is not masked/);
  }
});

void test("no API response carries a secret value, and get says only that it exists and when it was set", async () => {
  const r = await server.cli(["secret", "get", "API_TOKEN", "-o", "json"]);
  assert.equal(r.code, 0);
  const meta = JSON.parse(r.stdout) as Record<string, unknown>;
  assert.deepEqual(Object.keys(meta).sort(), ["exists", "name", "set_at"]);
  const runs = JSON.parse((await api(`${scoped}/runs`)).text) as Array<{ id: string }>;
  assert.ok(runs.length > 0);
  const paths = [
    "/api/v1/whoami",
    `${scoped}/secrets`,
    `${scoped}/secrets/API_TOKEN`,
    `${scoped}/secrets/CERT`,
    `${scoped}/runs`,
    `${scoped}/events`,
  ];
  for (const run of runs) paths.push(`${scoped}/runs/${run.id}`, `${scoped}/runs/${run.id}/steps`, `${scoped}/runs/${run.id}/log`);
  for (const p of paths) {
    const res = await api(p);
    assert.equal(res.status, 200, p);
    for (const v of [SECRET, "line-one-alpha", "line-two-beta"]) assert.ok(!res.text.includes(v), `${p} carries a secret value`);
  }
  const list = await server.cli(["secret", "list"]);
  assert.ok(!list.stdout.includes(SECRET) && !list.stderr.includes(SECRET));
});

void test("a workflow env value of the same name wins over the secret; the step body sees secrets but no FLOW_ variable but the key", async () => {
  const file = join(dir, "env.sh");
  await writeFile(
    file,
    [
      'echo "api=$API_TOKEN"',
      "flow step probe -- bash -c 'echo \"body token=${API_TOKEN:+set} flow_vars=$(env | grep -c ^FLOW_) key=${FLOW_IDEMPOTENCY_KEY:+set}\"'",
      "set +e",
      "flow step nested -- flow step inner -- true",
      'echo "nested exit=$?"',
    ].join("\n") + "\n",
  );
  const r = await server.cli(["submit", file, "--env", "API_TOKEN=from-env", "--follow"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /api=from-env/);
  assert.match(r.stdout, /body token=set flow_vars=1 key=set/);
  assert.match(r.stdout, /FLOW_AGENT_SOCKET is not set/);
  assert.match(r.stdout, /nested exit=1/);
});

void test("roles: a viewer lists secrets but cannot set or submit, a member submits but cannot set, a stranger sees no project", async () => {
  assert.ok(server.databaseUrl);
  const pool = new pg.Pool({ connectionString: server.databaseUrl });
  const tokens = {} as Record<Role | "stranger", string>;
  try {
    const project = (await findProject(pool, "default", "default"))!;
    for (const role of ["viewer", "member"] as const) {
      const t = mintToken("flw");
      await createUserWithToken(
        pool,
        { userId: mintId("usr"), tokenId: mintId("tok") },
        { name: `${role}-user`, projectId: project.projectId, role, tokenDigest: t.digest },
      );
      tokens[role] = t.token;
    }
    const s = mintToken("flw");
    await pool.query(`insert into users (id, name) values ($1, 'stranger')`, [mintId("usr")]);
    await pool.query(`insert into api_tokens (id, user_id, digest) select $1, id, $2 from users where name = 'stranger'`, [
      mintId("tok"),
      s.digest,
    ]);
    tokens.stranger = s.token;
  } finally {
    await pool.end();
  }
  const submit = { kind: "script", source: "echo hi\n", filename: "hi.sh" };
  assert.equal((await api(`${scoped}/secrets`, tokens.viewer)).status, 200);
  const viewerSet = await api(`${scoped}/secrets/X`, tokens.viewer, { method: "PUT", body: { value: "v" } });
  assert.equal(viewerSet.status, 403);
  assert.match(viewerSet.text, /needs the admin role on default\/default; viewer-user is viewer/);
  assert.equal((await api(`${scoped}/runs`, tokens.viewer, { method: "POST", body: submit })).status, 403);
  assert.equal((await api(`${scoped}/runs`, tokens.member, { method: "POST", body: submit })).status, 201);
  assert.equal((await api(`${scoped}/secrets/X`, tokens.member, { method: "PUT", body: { value: "v" } })).status, 403);
  assert.equal((await api(`${scoped}/secrets/API_TOKEN`, tokens.member, { method: "DELETE" })).status, 403);
  assert.equal((await api(`${scoped}/secrets`, tokens.stranger)).status, 404);
  const cliViewer = await server.cli(["secret", "set", "X", "v"], { env: { FLOWSVC_TOKEN: tokens.viewer } });
  assert.equal(cliViewer.code, 1);
  assert.match(cliViewer.stderr, /^error: .*admin role/m);
  // The token, the project and the role are one lookup: each failure still says which it was.
  const forged = await api(`${scoped}/secrets`, "flw_not-a-token-of-this-server");
  assert.equal(forged.status, 401);
  assert.match(forged.text, /the API token is not valid for this server/);
  const none = await request(`${server.url}${scoped}/secrets`);
  assert.equal(none.statusCode, 401);
  assert.match(await none.body.text(), /no API token was sent/);
  const elsewhere = await api("/api/v1/orgs/default/projects/no-such-project/secrets", tokens.member);
  assert.equal(elsewhere.status, 404);
  assert.match(elsewhere.text, /project default\/no-such-project not found/);
});

void test("bad secret input is refused with the reason and nothing is written", async () => {
  for (const [name, body, pattern] of [
    ["1BAD", { value: "v" }, /environment variable name/],
    ["FLOW_X", { value: "v" }, /reserved/],
    ["OK_NAME", { value: "" }, /value is empty/],
    ["OK_NAME", { value: "x".repeat(64 * 1024 + 1) }, /at most 65536 bytes/],
    ["OK_NAME", { value: 42 }, /value/],
  ] as const) {
    const res = await api(`${scoped}/secrets/${name}`, server.token, { method: "PUT", body });
    assert.equal(res.status, 400, `${name}: ${res.text}`);
    assert.match(res.text, pattern);
  }
  const list = JSON.parse((await server.cli(["secret", "list", "-o", "json"])).stdout) as Array<{ name: string }>;
  assert.deepEqual(list.map((s) => s.name).sort(), ["API_TOKEN", "CERT"]);
});

void test("run.started and run.succeeded / run.failed are on the bus with the spec's payload fields", async () => {
  const ok = join(dir, "ok.sh");
  await writeFile(ok, "flow output set answer=42\n");
  const bad = join(dir, "bad.sh");
  await writeFile(bad, 'echo "going down"\nexit 3\n');
  const okRun = (await server.cli(["submit", ok, "--tag", "env:prod", "--tag", "nightly", "--follow"])).stderr;
  const badRun = await server.cli(["submit", bad, "--follow"]);
  assert.equal(badRun.code, 1);
  const okId = /run-[0-9a-z]{26}/.exec(okRun)![0];
  const badId = /run-[0-9a-z]{26}/.exec(badRun.stderr)![0];
  const events = JSON.parse((await server.cli(["events", "ls", "--limit", "200", "-o", "json"])).stdout) as Array<{
    type: string;
    payload: Record<string, unknown>;
  }>;
  const of = (run: string, type: string) => events.filter((e) => e.type === type && e.payload["run_id"] === run);
  assert.equal(of(okId, "run.started").length, 1);
  const succeeded = of(okId, "run.succeeded");
  assert.equal(succeeded.length, 1);
  const p = succeeded[0]!.payload;
  assert.equal(p["status"], "succeeded");
  assert.equal(p["workflow"], "flowsvc/script/v1");
  assert.deepEqual(p["tags"], ["env:prod", "nightly"]);
  assert.deepEqual(p["tag"], { env: "prod" });
  assert.deepEqual(p["trigger"], { type: "manual" });
  assert.equal((p["output"] as Record<string, unknown>)["answer"], "42");
  assert.equal("run_url" in p, false);
  const failed = of(badId, "run.failed");
  assert.equal(failed.length, 1);
  assert.match(String(failed[0]!.payload["error"]), /exited with code 3/);
});
