/**
 * The rules of a secret's name and value (core/src/secret-rules.ts) through the real server and
 * the real `flow` CLI: names the loader, shells and interpreters read and values a process cannot
 * take are refused at `set` with the reason and nothing written; a secret stored before the rules
 * (written straight into the database, sealed as the API seals) is left out of each job, which the
 * run's log says by name, and never stops a run; no value reaches a response, a log or server.log.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { request } from "undici";
import { personSubmittedRun } from "@flowsvc/core";
import { Keyring, findProject, submitRunTransaction, upsertSecret } from "@flowsvc/store";
import { startTestServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

/** Every hostile value carries this marker; it must never show anywhere. */
const MARK = "qz7hunter";
const masterKey = randomBytes(32).toString("base64");

let server: TestServer;
let dir: string;

before(async () => {
  server = await startTestServer({ masterKey });
  dir = await mkdtemp(join(tmpdir(), "flowsvc-secret-rules-"));
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const scoped = "/api/v1/orgs/default/projects/default";

/** A request with a raw body, so a test can send JSON escapes (`\u0000`, a lone `\ud800`) as they are. */
const api = async (method: "GET" | "PUT" | "DELETE", path: string, rawBody?: string) => {
  const res = await request(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.token}`, ...(rawBody !== undefined ? { "content-type": "application/json" } : {}) },
    body: rawBody ?? null,
  });
  return { status: res.statusCode, text: await res.body.text() };
};

const secretNames = async (): Promise<string[]> => {
  const r = await server.cli(["secret", "list", "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as Array<{ name: string }>).map((s) => s.name).sort();
};

const serverLog = (): Promise<string> => readFile(join(server.dataDir, "server.log"), "utf8");

void test("set refuses names the loader, shells, interpreters and git read, in any case and however encoded, saying why", async () => {
  const before = await secretNames();
  const cases: Array<[string, RegExp]> = [
    ["LD_PRELOAD", /secret name \\"LD_PRELOAD\\" is refused: the dynamic loader/],
    ["ld_preload", /refused: the dynamic loader/],
    ["LD%5FPRELOAD", /"LD_PRELOAD\\" is refused: the dynamic loader/],
    ["DYLD_INSERT_LIBRARIES", /dynamic loader/],
    ["BASH_ENV", /a shell reads it at start/],
    ["ENV", /a shell reads it/],
    ["BASH_FUNC_x%25%25", /"BASH_FUNC_x%%\\" is refused: a shell reads it/],
    ["PATH", /which programs run/],
    ["HOME", /configuration/],
    ["NODE_OPTIONS", /an interpreter reads it at start/],
    ["PYTHONSTARTUP", /an interpreter reads it/],
    ["PERL5OPT", /interpreter/],
    ["JAVA_TOOL_OPTIONS", /interpreter/],
    ["GIT_SSH_COMMAND", /git reads it/],
    ["GIT_CONFIG_GLOBAL", /git reads it/],
    ["FLOW_X", /reserved for the service's own/],
    ["flow_x", /reserved/],
    ["1BAD", /not an environment variable name/],
    ["A%00B", /invalid_argument/], // another rule may refuse a NUL in any path segment first
    ["%D0%90PI_TOKEN", /not an environment variable name: use ASCII letters/],
  ];
  for (const [name, why] of cases) {
    const res = await api("PUT", `${scoped}/secrets/${name}`, JSON.stringify({ value: `${MARK}-v` }));
    assert.equal(res.status, 400, `${name}: ${res.text}`);
    assert.match(res.text, /"code":"invalid_argument"/);
    assert.match(res.text, why, name);
    assert.ok(!res.text.includes(MARK), `${name}: the answer quotes the value`);
  }
  assert.deepEqual(await secretNames(), before, "nothing was written");
});

void test("set refuses a value with a NUL byte or a lone surrogate, or over 64 KiB of UTF-8, without quoting it", async () => {
  const before = await secretNames();
  const cases: Array<[string, RegExp]> = [
    // NUL and lone surrogates in any JSON body are refused by the one JSON guard before the secret rule runs
    // (core/src/json-guard.ts); the secret rule's own wording is checked through the CLI below.
    [`{"value":"${MARK}\\u0000tail"}`, /body\.value holds a NUL character/],
    [`{"value":"\\u0000"}`, /body\.value holds a NUL character/],
    [`{"value":"${MARK}\\ud800tail"}`, /body\.value holds a lone UTF-16 surrogate/],
    [`{"value":"${MARK}\\udc00"}`, /lone UTF-16 surrogate/],
    [JSON.stringify({ value: `${MARK}${"€".repeat(30_000)}` }), /at most 65536 bytes \(UTF-8\); this one has 90009/],
    [`{"value":""}`, /the value is empty/],
    [`{"value":42}`, /value: the value must be a JSON string/],
  ];
  for (const [body, why] of cases) {
    const res = await api("PUT", `${scoped}/secrets/OK_NAME`, body);
    assert.equal(res.status, 400, `${body.slice(0, 40)}: ${res.text}`);
    assert.match(res.text, why);
    assert.ok(!res.text.includes(MARK) && !res.text.includes("€"), `the answer quotes the value: ${res.text.slice(0, 200)}`);
  }
  assert.deepEqual(await secretNames(), before, "nothing was written");
  // A surrogate pair is well-formed: an emoji is a fine value.
  assert.equal((await api("PUT", `${scoped}/secrets/EMOJI_OK`, '{"value":"ok-\\ud83d\\ude00"}')).status, 200);
  assert.equal((await api("DELETE", `${scoped}/secrets/EMOJI_OK`)).status, 204);
});

void test("flow secret set exits 2 with the reason for a refused name, and for a NUL byte on stdin, before sending anything", async () => {
  const ld = await server.cli(["secret", "set", "LD_PRELOAD", "x"]);
  assert.equal(ld.code, 2, ld.stderr);
  assert.match(
    ld.stderr,
    /^error: secret name "LD_PRELOAD" is refused: the dynamic loader or the C library reads it when every process starts/m,
  );
  const py = await server.cli(["secret", "set", "pythonpath", "-"], { input: `${MARK}\n` });
  assert.equal(py.code, 2);
  assert.match(py.stderr, /"pythonpath" is refused: an interpreter reads it at start/);
  const nul = await server.cli(["secret", "set", "API_KEY", "-"], { input: `${MARK}\u0000tail\n` });
  assert.equal(nul.code, 2, nul.stderr);
  assert.match(
    nul.stderr,
    /^error: secret API_KEY: the value holds a NUL byte \(\\0\), and a process environment cannot hold one: no job could start with it$/m,
  );
  const long = await server.cli(["secret", "set", "A".repeat(101), "x"]);
  assert.equal(long.code, 2);
  assert.match(long.stderr, /a secret name is at most 100 characters; this one has 101/);
  for (const r of [ld, py, nul]) assert.ok(!(r.stdout + r.stderr).includes(MARK) && !(r.stdout + r.stderr).includes("tail"));
  assert.ok(!(await secretNames()).includes("API_KEY"));
});

void test("a handler's credential variable follows the same rule", async () => {
  const file = join(dir, "h.sh");
  await writeFile(file, "echo handled\n");
  const r = await server.cli(["handler", "set", "h1", file, "--on", "x.y", "--credential", "LD_PRELOAD=deploy"]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /credentials: credential variable "LD_PRELOAD" is refused: the dynamic loader/);
  const flow = await server.cli(["handler", "set", "h1", file, "--on", "x.y", "--credential", "FLOW_TOKEN=deploy"]);
  assert.equal(flow.code, 2, flow.stderr);
  assert.match(flow.stderr, /credential variable "FLOW_TOKEN" is refused: FLOW_\* variables are reserved/);
});

void test("a secret stored before the rules is left out of each job, the run's log names it and why, and every run still succeeds", async () => {
  assert.ok(server.databaseUrl);
  const pool = new pg.Pool({ connectionString: server.databaseUrl });
  try {
    const keyring = await Keyring.create(pool, Buffer.from(masterKey, "base64"));
    const { orgId, projectId } = (await findProject(pool, "default", "default"))!;
    const store = async (name: string, value: string, sealedAs = name) =>
      upsertSecret(
        pool,
        projectId,
        name,
        await keyring.seal(orgId, { org: orgId, project: projectId, kind: "secret", name: sealedAs }, value),
      );
    await store("BAD_NUL", `${MARK}\u0000tail`);
    await store("LD_PRELOAD", `/nonexistent/${MARK}.so`);
    await store("MOVED", `${MARK}-moved`, "SOMEWHERE_ELSE"); // a ciphertext copied to another name does not open
    await store("GOOD_TOKEN", "good-value-4711");
  } finally {
    await pool.end();
  }
  const file = join(dir, "probe.sh");
  await writeFile(
    file,
    'echo "good=${GOOD_TOKEN:+set} nul=${BAD_NUL:-unset} ld=${LD_PRELOAD:-unset} moved=${MOVED:-unset}"\necho "token: $GOOD_TOKEN"\n',
  );
  for (let i = 0; i < 2; i += 1) {
    const r = await server.cli(["submit", file, "--follow"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /good=set nul=unset ld=unset moved=unset/);
    assert.match(r.stdout, /token: \*\*\*/, "the good secret is injected and masked");
    assert.match(r.stdout, /flowsvc: secret BAD_NUL was not injected: the value holds a NUL byte/);
    assert.match(r.stdout, /flowsvc: secret LD_PRELOAD was not injected: secret name "LD_PRELOAD" is refused: the dynamic loader/);
    assert.match(r.stdout, /flowsvc: secret MOVED was not injected: its stored value does not open with this server's keys/);
    assert.match(r.stdout, /remove it \(flow secret rm BAD_NUL\)/);
    assert.ok(!(r.stdout + r.stderr).includes(MARK), "the run's log quotes a value");
  }
  await waitFor("server.log to record the skipped secrets", async () => (await serverLog()).includes('"secretName":"MOVED"'));
  const log = await serverLog();
  assert.ok(!log.includes(MARK), "server.log quotes a value");
  assert.match(log, /"secretName":"BAD_NUL".*secret not injected/);
  // A name refused today can still be removed, and the next run is clean.
  for (const name of ["BAD_NUL", "LD_PRELOAD", "MOVED"]) {
    const rm = await server.cli(["secret", "rm", name]);
    assert.equal(rm.code, 0, `${name}: ${rm.stderr}`);
  }
  const clean = await server.cli(["submit", file, "--follow"]);
  assert.equal(clean.code, 0);
  assert.ok(!clean.stdout.includes("was not injected"), clean.stdout);
  assert.deepEqual(await secretNames(), ["GOOD_TOKEN"]);
});

void test("a run stored with env the rule refuses (before it existed) runs without those variables, and its log says which and why", async () => {
  const evil = join(dir, "evil.sh");
  await writeFile(evil, `echo ${MARK}-bash-env\n`);
  assert.ok(server.databaseUrl);
  const pool = new pg.Pool({ connectionString: server.databaseUrl });
  let runId: string;
  try {
    const { projectId } = (await findProject(pool, "default", "default"))!;
    const env = { OK_VAR: "kept", FLOW_TOKEN: MARK, LD_PRELOAD: `/nonexistent/${MARK}.so`, BASH_ENV: evil };
    const source = 'echo "ok=$OK_VAR tok=${FLOW_TOKEN:-unset} ld=${LD_PRELOAD:-unset} bashenv=${BASH_ENV:-unset}"\n';
    const run = personSubmittedRun(
      { kind: "script", source, filename: "old.sh", env, credentials: {}, tags: [] },
      { projectId, sender: "test", createdBy: null, idempotencyKey: null },
    );
    runId = (await submitRunTransaction(pool, run, { sender: "test", credentials: {} })).id;
  } finally {
    await pool.end();
  }
  const r = await server.cli(["follow", runId]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /ok=kept tok=unset ld=unset bashenv=unset/);
  assert.match(
    r.stdout,
    /flowsvc: left out of the job's environment: env variable "FLOW_TOKEN" is refused: FLOW_\* variables are reserved/,
  );
  assert.match(r.stdout, /flowsvc: left out of the job's environment: env variable "BASH_ENV" is refused: a shell reads it/);
  assert.ok(!r.stdout.includes(MARK), "a left-out variable took effect or its value was quoted");
});
