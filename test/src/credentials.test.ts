/**
 * Credentials end to end, with the real `flow` CLI, server and agents: each kind set from stdin,
 * listed by name and kind only, handed to a script by `flow submit --credential ENV=name` and
 * masked in the live and the stored log; a missing credential, and any credential for an untrusted
 * run, fail the job before the script runs.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { access, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { createRun, findProject, setRunCredentials, withTransaction } from "@flowsvc/store";
import { startTestServer, type TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";

const TOKEN = "gh-T0ken-€-e2e-5521";
const KEY = "llm-Key-e2e-7730";
const PASSWORD = "reg-Pass-e2e-1189";
const HOOK = "hook-Tok-e2e-4402";
const VALUES = [TOKEN, KEY, PASSWORD, HOOK];

let server: TestServer;
let dir: string;

const sha = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");
const exists = (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

before(async () => {
  server = await startTestServer();
  dir = await scriptDir("flowsvc-credentials-");
  for (const [args, input] of [
    [["gh", "--kind", "bearer", "--token", "-"], `${TOKEN}\n`],
    [["llm", "--kind", "api-key", "--header", "x-api-key", "--value", KEY], ""],
    [["reg", "--kind", "basic", "--username", "ci", "--password", "-"], PASSWORD],
    [["hook", "--kind", "url-token", "--token", "-"], HOOK],
  ] as const) {
    const r = await server.cli(["credential", "set", ...args], { input });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`credential ${args[0]} set`));
  }
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

void test("credential list shows names and kinds, never a value", async () => {
  const list = await server.cli(["credential", "list", "-o", "json"]);
  assert.equal(list.code, 0, list.stderr);
  const rows = JSON.parse(list.stdout) as Array<{ name: string; kind: string }>;
  assert.deepEqual(
    rows.map((r) => [r.name, r.kind]),
    [
      ["gh", "bearer"],
      ["hook", "url_token"],
      ["llm", "api_key"],
      ["reg", "basic"],
    ],
  );
  for (const v of VALUES) assert.ok(!`${list.stdout}${list.stderr}`.includes(v), `list shows ${v}`);
});

void test("submit --credential: each kind reaches the script as its variable, masked live and in the stored log", async () => {
  const file = join(dir, "use.sh");
  await writeFile(
    file,
    [
      'echo "gh=$GH key=$KEY reg=$REG hook=$HOOK"',
      'printf "%s" "${GH:0:5}"; printf "%s\\n" "${GH:5}"',
      'for v in GH KEY REG HOOK; do printf "%s sha=%s\\n" "$v" "$(printf %s "${!v}" | sha256sum | cut -c1-64)"; done',
    ].join("\n") + "\n",
  );
  const creds = ["--credential", "GH=gh", "--credential", "KEY=llm", "--credential", "REG=reg", "--credential", "HOOK=hook"];
  const live = await server.cli(["submit", file, ...creds, "--env", "GH=literal", "--follow"]);
  assert.equal(live.code, 0, live.stderr);
  const run = /run-[0-9a-z]{26}/.exec(live.stderr)![0];
  const stored = await server.cli(["follow", run]);
  for (const [what, text] of [
    ["live", live.stdout],
    ["stored", stored.stdout],
  ] as const) {
    for (const v of [...VALUES, `ci:${PASSWORD}`]) assert.ok(!text.includes(v), `${what} log shows ${v}`);
    assert.match(text, /gh=\*\*\* key=\*\*\* reg=\*\*\* hook=\*\*\*/, what);
    // A hash is a transformed value, not masked: it proves what each variable held (the credential over --env).
    for (const [v, value] of [
      ["GH", TOKEN],
      ["KEY", KEY],
      ["REG", `ci:${PASSWORD}`],
      ["HOOK", HOOK],
    ] as const)
      assert.match(text, new RegExp(`${v} sha=${sha(value)}`), `${what}: ${v}`);
  }
  const status = await server.cli(["status", run, "-o", "json"]);
  for (const v of VALUES) assert.ok(!status.stdout.includes(v), `status shows ${v}`);
});

void test("a missing credential fails the job before the script runs", async () => {
  const marker = join(dir, "missing-ran");
  const file = join(dir, "missing.sh");
  await writeFile(file, `touch ${JSON.stringify(marker)}\n`);
  const r = await server.cli(["submit", file, "--credential", "GH=gh", "--credential", "NOPE=not-set-anywhere", "--follow"]);
  assert.equal(r.code, 1, r.stderr);
  const run = /run-[0-9a-z]{26}/.exec(r.stderr)![0];
  const status = await server.cli(["status", run, "-o", "json"]);
  const view = JSON.parse(status.stdout) as { status: string; error: string };
  assert.equal(view.status, "failed");
  assert.match(view.error, /NOPE: credential "not-set-anywhere" is not set in this project/);
  assert.ok(!(await exists(marker)), "the script ran");
  assert.ok(!`${r.stdout}${status.stdout}`.includes(TOKEN));
});

void test("an untrusted run that declares a credential gets none: it fails before its script runs", async () => {
  assert.ok(server.databaseUrl);
  const pool = new pg.Pool({ connectionString: server.databaseUrl, max: 1 });
  try {
    const project = await findProject(pool, "default", "default");
    assert.ok(project);
    const marker = join(dir, "untrusted-ran");
    // The run a handler with `--credential` would start for a fork's delivery: untrusted, declaring one.
    const runId = await withTransaction(pool, async (tx) => {
      const created = await createRun(tx, {
        projectId: project.projectId,
        source: `touch ${JSON.stringify(marker)}\n`,
        filename: "untrusted.sh",
        trusted: false,
      });
      await setRunCredentials(tx, created.id, { GH: "gh" });
      return created.id;
    });
    const follow = await server.cli(["follow", runId]);
    assert.equal(follow.code, 1, follow.stderr);
    const view = JSON.parse((await server.cli(["status", runId, "-o", "json"])).stdout) as { status: string; error: string };
    assert.equal(view.status, "failed");
    assert.match(view.error, /untrusted event and gets no credentials, but it declares GH=gh/);
    assert.ok(!(await exists(marker)), "the untrusted script ran");
  } finally {
    await pool.end();
  }
});
