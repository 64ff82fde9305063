/**
 * Who may call the agent API (/agent/v1/*), through the real server: no token, or a token that is
 * not a job token (a user's API token), is 401 saying a job token is needed; a job token whose job
 * finished or was dispatched again is 409 `job_lost`, which the agent reads as "end this job".
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { request } from "undici";
import { mintToken } from "@flowsvc/store";
import { startTestServer, type TestServer } from "./support/server.js";

let server: TestServer;
let dir: string;

before(async () => {
  server = await startTestServer({ agents: 1 });
  dir = await mkdtemp(join(tmpdir(), "flowsvc-agent-auth-"));
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const ROUTES = ["heartbeat", "claim", "journal", "log", "annotate", "finish", "call", "suspend", "state", "finish-activity"];

const post = async (route: string, authorization: string | undefined) => {
  const res = await request(`${server.url}/agent/v1/${route}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(authorization !== undefined ? { authorization } : {}) },
    body: "{}",
  });
  return { status: res.statusCode, text: await res.body.text() };
};

void test("no token, a user's API token or a token of no known kind on /agent/v1/* is 401 saying a job token is needed", async () => {
  for (const route of ROUTES) {
    const none = await post(route, undefined);
    assert.equal(none.status, 401, `${route} without a token: ${none.text}`);
    assert.match(
      none.text,
      /"code":"unauthenticated".*the agent API needs a job token \(Authorization: Bearer job_\.\.\.\); none was sent/,
    );
    const user = await post(route, `Bearer ${server.token}`);
    assert.equal(user.status, 401, `${route} with the admin's API token: ${user.text}`);
    assert.match(user.text, /"code":"unauthenticated".*needs a job token .*this is not one/);
    assert.match(user.text, /a user's API token works on \/api\/v1 only/);
    for (const other of ["Bearer garbage", "Bearer flw_%00", "Basic dXNlcjpwYXNz"]) {
      const r = await post(route, other);
      assert.equal(r.status, 401, `${route} with ${other}: ${r.text}`);
    }
  }
});

void test("a job token whose job finished is still 409 job_lost, as is one the server never minted", async () => {
  const file = join(dir, "done.sh");
  await writeFile(file, "echo done\n");
  const r = await server.cli(["submit", file, "--follow"]);
  assert.equal(r.code, 0, r.stderr);
  const run = /run-[0-9a-z]{26}/.exec(r.stderr)![0];
  // The finished job's token is revoked; give it a known one, as a token kept past the end would be.
  const finished = mintToken("job");
  assert.ok(server.databaseUrl);
  const pool = new pg.Pool({ connectionString: server.databaseUrl });
  try {
    const { rowCount } = await pool.query(`update jobs set token_digest = $2 where run_id = $1 and status = 'done'`, [
      run,
      finished.digest,
    ]);
    assert.equal(rowCount, 1);
  } finally {
    await pool.end();
  }
  for (const token of [finished.token, mintToken("job").token]) {
    for (const route of ROUTES) {
      const res = await post(route, `Bearer ${token}`);
      assert.equal(res.status, 409, `${route}: ${res.text}`);
      assert.match(res.text, /"code":"job_lost"/);
    }
  }
});
