/**
 * Connected accounts end to end, with the real `flow` CLI, server, renewal loop and agents, and the
 * OAuth provider peer as the far side (this test plays the browser): connect, `flow account list`,
 * a script given the account's token with `--credential TOKEN=<account>` (masked), the grant revoked
 * at the provider (renewal finds `invalid_grant`: `needs_reauth`), a job naming it then fails before
 * its script runs, and `flow account rm` revokes. Then a granter who leaves: `flow member rm` disables
 * the accounts they granted at once, a graph and a script naming one fail with the reconnect message
 * and the provider sees no request with its token; rejoining and reconnecting makes it usable, and
 * `flow account disable` switches it off by hand.
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
const connect = async (name: string, token = server.token): Promise<Response> => {
  const res = await fetch(`${server.url}/api/v1/orgs/default/projects/default/accounts/connect`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
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

void test("a granter removed from the project (flow member rm) disables their account at once: graph and script fail, nothing reaches the provider", async () => {
  // A second member, bea, added as an admin adds people: `flow user add` prints her first token.
  const added = await server.cli(["user", "add", "bea", "--role", "member"]);
  assert.equal(added.code, 0, added.stderr);
  const bea = { token: added.stdout.trim() };
  peer.user = { id: 5150, login: "bea-octo" };
  const connected = await connect("bea-gh", bea.token);
  assert.equal(connected.status, 200, await connected.text());
  const token = peer.issuedAccess.at(-1)!;

  const graphFile = join(dir, "whoami.json");
  const node = { id: "me", type: "http", config: { url: `${peer.url}/user`, credential: "bea-gh" } };
  await writeFile(graphFile, JSON.stringify({ version: "flowsvc-graph/v1", nodes: [node], edges: [] }));
  const seen = peer.identityTokens.filter((t) => t === token).length;
  assert.equal(seen, 1, "the connect's identity lookup presented the token");

  const members = await server.cli(["member", "ls", "-o", "json"]);
  assert.equal(members.code, 0, members.stderr);
  assert.deepEqual(
    (JSON.parse(members.stdout) as Array<{ user: string; role: string; granted: string[] }>).find((m) => m.user === "bea"),
    { user: "bea", role: "member", granted: ["bea-gh"] },
  );
  const removed = await server.cli(["member", "rm", "bea"]);
  assert.equal(removed.code, 0, removed.stderr);
  assert.match(removed.stderr, /bea removed; connected accounts disabled \(reconnect them to use them again\): bea-gh/);
  const list = JSON.parse((await server.cli(["account", "list", "-o", "json"])).stdout) as Array<{ name: string; status: string }>;
  assert.equal(list.find((a) => a.name === "bea-gh")?.status, "disabled");

  const refused = await server.cli(["submit", graphFile, "--follow"]);
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /connected account "bea-gh" is disabled: reconnect it on the Connections page/);
  const marker = join(dir, "bea-ran");
  const script = join(dir, "bea.sh");
  await writeFile(script, `touch ${JSON.stringify(marker)}\ncurl -s -H "Authorization: Bearer $TOKEN" ${peer.url}/user\n`);
  const failed = await server.cli(["submit", script, "--credential", "TOKEN=bea-gh", "--follow"]);
  assert.equal(failed.code, 1, failed.stderr);
  const run = /run-[0-9a-z]{26}/.exec(failed.stderr)![0];
  const view = JSON.parse((await server.cli(["status", run, "-o", "json"])).stdout) as { error: string };
  assert.match(view.error, /TOKEN: connected account "bea-gh" is disabled: reconnect it on the Connections page/);
  assert.ok(!(await exists(marker)()), "the script never ran");
  assert.equal(peer.identityTokens.filter((t) => t === token).length, seen, "the provider saw no request with the token since");

  // Back in the project, bea reconnects (the same far-side account) and it is usable; an admin can switch it off by hand.
  assert.equal((await server.cli(["member", "set", "bea", "--role", "member"])).code, 0);
  assert.equal((await connect("bea-gh", bea.token)).status, 200);
  const off = await server.cli(["account", "disable", "bea-gh"]);
  assert.equal(off.code, 0, off.stderr);
  assert.match(off.stderr, /connected account bea-gh disabled: reconnect it on the Connections page to use it again/);
  const after = JSON.parse((await server.cli(["account", "list", "-o", "json"])).stdout) as Array<{ name: string; status: string }>;
  assert.equal(after.find((a) => a.name === "bea-gh")?.status, "disabled");
});
