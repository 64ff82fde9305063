/**
 * The user CLI end to end: the real `flow` binary against a real `flow server` (its API,
 * controller, agents and Postgres), using the config the server wrote at its first start.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { startTestServer } from "./support/server.js";
import type { TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { FOLLOW_TIMEOUT, RUN_ID, runKit, type RunView } from "./support/runs.js";

let server: TestServer;
let dir: string;

before(async () => {
  server = await startTestServer();
  dir = await scriptDir("flowsvc-cli-test-");
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const { script, json } = runKit(
  () => server,
  () => dir,
);

void test("submit prints only the run id; follow prints the log and exits 0; status and runs ls report it", async () => {
  const file = await script("hello.sh", 'echo "hello from $GREETING"\n');
  const submitted = await server.cli(["submit", file, "--env", "GREETING=flowsvc", "--tag", "cli-test"]);
  assert.equal(submitted.code, 0, submitted.stderr);
  const id = submitted.stdout.trim();
  assert.match(id, new RegExp(`^${RUN_ID.source}$`));
  assert.equal(submitted.stdout, `${id}\n`);

  const followed = await server.cli(["follow", id], FOLLOW_TIMEOUT);
  assert.equal(followed.code, 0, followed.stderr);
  assert.match(followed.stdout, /hello from flowsvc\n/);

  const run = await json<RunView>(["status", id]);
  assert.equal(run.id, id);
  assert.equal(run.status, "succeeded");
  const table = await server.cli(["status", id]);
  assert.match(table.stdout, /^status:\s+succeeded$/m);

  const listed = await json<RunView[]>(["runs", "ls", "--tag", "cli-test"]);
  assert.deepEqual(
    listed.map((r) => r.id),
    [id],
  );
  const again = await server.cli(["follow", id]);
  assert.equal(again.code, 0);
  assert.match(again.stdout, /hello from flowsvc\n/, "following a finished run prints its whole log");
});

void test("submit --follow streams the log, puts the id on stderr and exits 1 when the script fails", async () => {
  const file = await script("fails.sh", "echo about-to-fail\nexit 3\n");
  const r = await server.cli(["submit", file, "--follow"], FOLLOW_TIMEOUT);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /about-to-fail\n/);
  const id = RUN_ID.exec(r.stderr)?.[0];
  assert.ok(id, r.stderr);
  assert.doesNotMatch(r.stdout, RUN_ID);
  assert.equal((await json<RunView>(["status", id])).status, "failed");
});

void test("a repeat submit under one idempotency key answers the first run's id and creates no run", async () => {
  const file = await script("once.sh", "true\n");
  const first = await server.cli(["submit", file, "--idempotency-key", "cli-test-once"]);
  const second = await server.cli(["submit", file, "--idempotency-key", "cli-test-once"]);
  assert.equal(second.code, 0, second.stderr);
  assert.equal(second.stdout, first.stdout);
  assert.match(second.stderr, /^duplicate: run run-\S+ was already submitted under this idempotency key\n$/);
});

void test("steps lists a script's recorded steps as name#ordinal with exit code and bytes", async () => {
  const file = await script("steps.sh", "flow step build -- echo built\nflow step build -- echo again\n");
  const r = await server.cli(["submit", file, "--follow"], FOLLOW_TIMEOUT);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const id = RUN_ID.exec(r.stderr)?.[0] ?? "";
  const table = await server.cli(["steps", id]);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^0\s+step\s+build#0\s+done\s+0\s+6$/m);
  assert.match(table.stdout, /^1\s+step\s+build#1\s+done\s+0\s+6$/m);
});

void test("a secret set from stdin is listed, injected into jobs and masked, never printed by the CLI, and removable", async () => {
  const value = "cli-test-s3cr3t-value";
  const set = await server.cli(["secret", "set", "CLI_TEST_TOKEN", "-"], { input: `${value}\n` });
  assert.equal(set.code, 0, set.stderr);

  const names = await json<Array<{ name: string; set_at: string }>>(["secret", "list"]);
  assert.ok(names.some((s) => s.name === "CLI_TEST_TOKEN"));
  const got = await server.cli(["secret", "get", "CLI_TEST_TOKEN"]);
  assert.equal(got.code, 0, got.stderr);
  assert.match(got.stdout, /^CLI_TEST_TOKEN {2}set \d{4}-/);

  const file = await script("uses-secret.sh", 'echo "token=$CLI_TEST_TOKEN"\n[ "$CLI_TEST_TOKEN" = "cli-test-s3cr3t-value" ]\n');
  const r = await server.cli(["submit", file, "--follow"], FOLLOW_TIMEOUT);
  assert.equal(r.code, 0, "the job saw the value without the newline stdin ended with");
  assert.match(r.stdout, /token=\*\*\*\n/);
  for (const out of [set, got, r]) assert.ok(!(out.stdout + out.stderr).includes(value));

  const removed = await server.cli(["secret", "rm", "CLI_TEST_TOKEN"]);
  assert.equal(removed.code, 0, removed.stderr);
  const gone = await server.cli(["secret", "get", "CLI_TEST_TOKEN"]);
  assert.equal(gone.code, 1);
  assert.match(gone.stderr, /^error: secret CLI_TEST_TOKEN is not set/);
});

void test("a token the server does not know is exit 1 with a hint to log in", async () => {
  const r = await server.cli(["runs", "ls"], { env: { FLOWSVC_TOKEN: "not-a-real-token" } });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^error: .*\nrun `flow login --url http:\/\/\S+ --token <token>` or set FLOWSVC_TOKEN/);
});

void test("login checks the token and saves a 0600 config the next command uses", async () => {
  const configPath = join(dir, "login", "config.json");
  const env = { FLOWSVC_CONFIG: configPath };
  const r = await server.cli(["login", "--url", server.url, "--token", server.token], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^logged in to http:\/\/\S+ as \S+; project default\/default \(admin\)\n$/);
  assert.deepEqual(JSON.parse(await readFile(configPath, "utf8")), { url: server.url, token: server.token, project: "default/default" });
  assert.equal((await stat(configPath)).mode & 0o777, 0o600);
  const listed = await server.cli(["runs", "ls", "-o", "json"], { env });
  assert.equal(listed.code, 0, listed.stderr);
});

void test("events ls answers one JSON array; emit prints an event id or fails cleanly where the route is missing", async () => {
  const events = await json<unknown[]>(["events", "ls", "--limit", "5"]);
  assert.ok(Array.isArray(events));
  const r = await server.cli(["emit", "cli-test.done", "--payload", '{"ok":true}']);
  if (r.code === 0) assert.match(r.stdout, /^evt-[0-9a-z]{26}\n$/);
  else {
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error: .*\n.*upgrade the server/);
  }
});

// The refusals (a taken name, the token in use, hostile input) are ingest/src/routes/users.test.ts's.
void test("people: the admin adds ann, ann submits but cannot add users, makes a second token and revokes the first, which is then 401", async () => {
  const added = await server.cli(["user", "add", "ann", "--role", "member"]);
  assert.equal(added.code, 0, added.stderr);
  assert.match(added.stdout, /^flw_[A-Za-z0-9_-]{43}\n$/, "the token alone on stdout: TOKEN=$(flow user add ...) takes it");
  assert.match(added.stderr, /ann added as member of default\/default; .*shown only now/);
  const first = added.stdout.trim();
  const asAnn = (token: string) => ({ env: { FLOWSVC_TOKEN: token } });
  const submitted = await server.cli(["submit", await script("ann.sh", "echo ann\n")], asAnn(first));
  assert.equal(submitted.code, 0, submitted.stderr);
  assert.match(submitted.stdout.trim(), new RegExp(`^${RUN_ID.source}$`));
  const refused = await server.cli(["user", "add", "bob", "--role", "viewer"], asAnn(first));
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^error: this needs the admin role on default\/default; ann is member/);

  const made = await server.cli(["token", "create", "--label", "laptop"], asAnn(first));
  assert.equal(made.code, 0, made.stderr);
  const second = made.stdout.trim();
  assert.match(second, /^flw_/);
  const listed = await server.cli(["token", "ls", "-o", "json"], asAnn(second));
  assert.equal(listed.code, 0, listed.stderr);
  const tokens = JSON.parse(listed.stdout) as Array<{ id: string; label: string; current: boolean }>;
  assert.deepEqual(
    tokens.map((t) => [t.label, t.current]),
    [
      ["created by admin for ann", false],
      ["laptop", true],
    ],
  );
  assert.doesNotMatch(listed.stdout, /flw_/);
  const rm1 = await server.cli(["token", "rm", tokens[0]!.id], asAnn(second));
  assert.equal(rm1.code, 0, rm1.stderr);
  const gone = await server.cli(["runs", "ls"], asAnn(first));
  assert.equal(gone.code, 1);
  assert.match(gone.stderr, /^error: the API token is not valid for this server/);
});
