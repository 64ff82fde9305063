/**
 * Connected accounts end to end, with the real `flow` CLI, server, renewal loop and agents, and the
 * OAuth provider peer as the far side (this test plays the browser): connect, `flow account list`,
 * a script given the account's token with `--credential TOKEN=<account>` (masked), the grant revoked
 * at the provider (renewal finds `invalid_grant`: `needs_reauth`), a job naming it then fails before
 * its script runs, and `flow account rm` revokes.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { startTestServer, type TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { exists } from "./support/runs.js";
import { waitFor } from "./support/wait.js";
import { OAuthProviderPeer } from "./peers/oauth-provider.js";

const REDIRECT = "http://127.0.0.1:1/oauth/callback";
let server: TestServer;
let peer: OAuthProviderPeer;
let dir: string;
let pool: pg.Pool;

before(async () => {
  peer = await new OAuthProviderPeer({ rotatesRefreshToken: true, reuseRevokesFamily: true, expiresIn: 3600 }).start();
  server = await startTestServer({
    env: {
      FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS: JSON.stringify([peer.providerConfig("github")]),
      FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI: REDIRECT,
    },
  });
  assert.ok(server.databaseUrl);
  pool = new pg.Pool({ connectionString: server.databaseUrl, max: 1 });
  dir = await scriptDir("flowsvc-accounts-");
});

after(async () => {
  await pool?.end();
  await server?.stop();
  await peer?.close();
  await rm(dir, { recursive: true, force: true });
});

const sha = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");

/** What a browser does: POST connect (with the user's API token), consent at the provider, land on the callback. */
const connect = async (name: string): Promise<Response> => {
  const res = await fetch(`${server.url}/api/v1/orgs/default/projects/default/accounts/connect`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: JSON.stringify({ name, provider: "github" }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const cookie = res.headers.get("set-cookie")!.split(";")[0]!;
  const { authorize_url } = (await res.json()) as { authorize_url: string };
  const back = new URL((await fetch(authorize_url, { redirect: "manual" })).headers.get("location")!);
  return fetch(`${server.url}${back.pathname}${back.search}`, { headers: { cookie } });
};

void test("connect, list, use in a script (masked), the grant revoked at the provider fails the job, rm revokes", async () => {
  peer.user = { id: 4242, login: "octo-ann" };
  const done = await connect("gh");
  assert.equal(done.status, 200, await done.text());
  const token = peer.issuedAccess.at(-1)!;

  const list = await server.cli(["account", "list", "-o", "json"]);
  assert.equal(list.code, 0, list.stderr);
  const rows = JSON.parse(list.stdout) as Array<Record<string, string>>;
  assert.deepEqual(
    rows.map((r) => [r["name"], r["provider"], r["far_label"], r["status"]]),
    [["gh", "github", "octo-ann", "active"]],
  );
  const table = await server.cli(["account", "list"]);
  assert.match(table.stdout + table.stderr, /gh\s+github\s+octo-ann\s+active/);
  assert.ok(!`${list.stdout}${table.stdout}${table.stderr}`.includes(token), "list shows no token");

  const file = join(dir, "use.sh");
  await writeFile(file, 'echo "tok=$TOKEN"\nprintf "sha=%s\\n" "$(printf %s "$TOKEN" | sha256sum | cut -c1-64)"\n');
  const live = await server.cli(["submit", file, "--credential", "TOKEN=gh", "--follow"]);
  assert.equal(live.code, 0, live.stderr);
  assert.match(live.stdout, /tok=\*\*\*/);
  assert.match(live.stdout, new RegExp(`sha=${sha(token)}`), "the script got the account's access token");
  assert.ok(!live.stdout.includes(token));

  // The person revokes the grant at the provider; the next renewal meets invalid_grant.
  await fetch(`${peer.url}/revoke`, {
    method: "POST",
    body: new URLSearchParams({ token, client_id: peer.opts.clientId, client_secret: peer.opts.clientSecret }),
  });
  await pool.query(`update accounts set refresh_after = now() where name = 'gh'`);
  await waitFor(
    "the renewal loop to mark gh needs_reauth",
    async () => {
      const { rows: r } = await pool.query<{ status: string }>(`select status from accounts where name = 'gh'`);
      return r[0]?.status === "needs_reauth";
    },
    20_000,
  );

  const marker = join(dir, "ran");
  const blocked = join(dir, "blocked.sh");
  await writeFile(blocked, `touch ${JSON.stringify(marker)}\n`);
  const failed = await server.cli(["submit", blocked, "--credential", "TOKEN=gh", "--follow"]);
  assert.equal(failed.code, 1, failed.stderr);
  const run = /run-[0-9a-z]{26}/.exec(failed.stderr)![0];
  const view = JSON.parse((await server.cli(["status", run, "-o", "json"])).stdout) as { status: string; error: string };
  assert.equal(view.status, "failed");
  assert.match(view.error, /TOKEN: connected account "gh" is needs_reauth: reconnect it on the Connections page/);
  assert.ok(!(await exists(marker)()), "the script never ran");

  const removed = await server.cli(["account", "rm", "gh"]);
  assert.equal(removed.code, 0, removed.stderr);
  assert.match(removed.stderr, /connected account gh removed/);
  const empty = await server.cli(["account", "list", "-o", "json"]);
  assert.deepEqual(JSON.parse(empty.stdout), []);
});
