/**
 * Inbound event hooks end to end (spec "Event hook", "Authentication" 2; SECURITY.md "Event
 * hooks"): the real `flow` CLI manages them, deliveries go over HTTP to the real server (the
 * GitHub ones from the test forge, signed as GitHub signs), and the bus rows are read back from
 * the real Postgres.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { request } from "undici";
import { createUserWithToken, findProject, mintId, mintToken } from "@flowsvc/store";
import { TestForge } from "./forge/forge.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { waitFor } from "./support/wait.js";

const API_TOKEN = "hook-test-S3cret-value-0815";
const scoped = "/api/v1/orgs/default/projects/default";

let server: TestServer;
let db: pg.Pool;
/** Every hook secret and key handed out, to scan responses and the log for. */
const handedOut: string[] = [];

before(async () => {
  server = await startTestServer({ env: { FLOWSVC_AGENT_POOLS: "polyglot:2" } });
  db = new pg.Pool({ connectionString: server.databaseUrl, max: 2 });
  assert.equal((await server.cli(["secret", "set", "API_TOKEN", API_TOKEN])).code, 0);
});

after(async () => {
  await db?.end();
  await server?.stop();
});

interface Answer {
  status: number;
  text: string;
  json: Record<string, unknown>;
}

const http = async (
  url: string,
  init: { method?: "GET" | "PUT" | "POST" | "DELETE"; headers?: Record<string, string>; body?: string | Buffer; token?: string } = {},
): Promise<Answer> => {
  const res = await request(url.startsWith("http") ? url : `${server.url}${url}`, {
    method: init.method ?? "POST",
    headers: { ...(init.token ? { authorization: `Bearer ${init.token}` } : {}), ...init.headers },
    body: init.body ?? null,
  });
  const text = await res.body.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return { status: res.statusCode, text, json };
};

const api = (path: string, method: "GET" | "PUT" | "POST" | "DELETE" = "GET", body?: unknown, token = server.token): Promise<Answer> =>
  http(`${scoped}${path}`, {
    method,
    token,
    ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
  });

interface HookJson {
  name: string;
  ingest_url: string;
  secret?: string;
  event_type: string | null;
}

const setHook = async (args: string[]): Promise<HookJson> => {
  const r = await server.cli(["event-hook", "set", ...args, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  const hook = JSON.parse(r.stdout) as HookJson;
  if (hook.secret) handedOut.push(hook.secret);
  return hook;
};

const busRow = async (id: string) =>
  (
    await db.query<{
      type: string;
      key: string | null;
      payload: unknown;
      fields: Record<string, unknown> | null;
      trusted: boolean;
      delivery_id: string | null;
    }>(`select type, key, payload, fields, trusted, delivery_id from events where id = $1`, [id])
  ).rows[0];

const countHookRows = async (hook: string): Promise<number> =>
  (await db.query<{ n: number }>(`select count(*)::int as n from events where hook_name = $1`, [hook])).rows[0]!.n;

void test("a shared-token hook: set prints the URL, the secret once and a curl that works; header and ?secret= are accepted after commit", async () => {
  const printed = await server.cli(["event-hook", "set", "deploys", "--event-type", "deploy.requested"]);
  assert.equal(printed.code, 0, printed.stderr);
  const url = /ingest URL:\s+(\S+)/.exec(printed.stdout)?.[1];
  const secret = /secret:\s+(fhs_\S+)/.exec(printed.stdout)?.[1];
  assert.ok(url && secret, printed.stdout);
  handedOut.push(secret);
  assert.equal(url, `${server.url}/api/v1/hooks/default/default/deploys`);
  const curl = /sample request:\n\s+(curl .+)/.exec(printed.stdout)?.[1];
  assert.ok(curl?.includes(`X-Flow-Hook-Secret: ${secret}`), printed.stdout);

  // The printed sample, run as printed.
  const sample = JSON.parse((await promisify(execFile)("bash", ["-c", curl!])).stdout) as { event_id: string; event_type: string };
  assert.equal(sample.event_type, "deploy.requested");
  assert.deepEqual((await busRow(sample.event_id))?.payload, { body: { hello: "world" }, query: {} });

  const viaHeader = await http(`${url}?env=prod&n=3`, {
    headers: { "x-flow-hook-secret": secret, "content-type": "application/json" },
    body: '{"version":"1.2.3","count":2,"ok":true,"tags":["a",1]}',
  });
  assert.equal(viaHeader.status, 202, viaHeader.text);
  assert.deepEqual(Object.keys(viaHeader.json).sort(), ["event_id", "event_type"]);
  assert.equal(viaHeader.json["event_type"], "deploy.requested");
  // The 202 came after the commit: the row is there the moment the answer is.
  const row = await busRow(viaHeader.json["event_id"] as string);
  assert.deepEqual(row?.payload, { body: { version: "1.2.3", count: 2, ok: true, tags: ["a", 1] }, query: { env: "prod", n: "3" } });
  assert.equal(row?.type, "deploy.requested");

  const viaQuery = await http(`${url}?secret=${encodeURIComponent(secret)}&from=cron`, { body: "" });
  assert.equal(viaQuery.status, 202, viaQuery.text);
  assert.deepEqual(
    (await busRow(viaQuery.json["event_id"] as string))?.payload,
    { body: {}, query: { from: "cron" } },
    "the secret is not kept in the payload",
  );
});

void test("no secret or a wrong one is a 401 that names X-Flow-Hook-Secret, and nothing is recorded", async () => {
  const hook = await setHook(["guarded", "--event-type", "guarded.ping"]);
  for (const init of [{}, { headers: { "x-flow-hook-secret": "fhs_wrong" } }, { headers: { "x-flow-hook-secret": `${hook.secret!}x` } }]) {
    const r = await http(hook.ingest_url, { ...init, body: "{}" });
    assert.equal(r.status, 401, r.text);
    assert.match(r.text, /X-Flow-Hook-Secret/);
  }
  const q = await http(`${hook.ingest_url}?secret=nope`, { body: "{}" });
  assert.equal(q.status, 401);
  assert.match(q.text, /X-Flow-Hook-Secret/);
  assert.equal(await countHookRows("guarded"), 0);
  assert.equal((await http("/api/v1/hooks/default/default/no-such-hook", { body: "{}" })).status, 404);
});

void test("payload shapes: {} for an empty body, a non-JSON body verbatim as a string, JSON types kept, query values strings; 2 MiB + 1 is a 413", async () => {
  const hook = await setHook(["shapes", "--event-type", "shapes.seen"]);
  const send = async (body: string | Buffer, contentType?: string, query = "") => {
    const r = await http(`${hook.ingest_url}${query}`, {
      headers: { "x-flow-hook-secret": hook.secret!, ...(contentType ? { "content-type": contentType } : {}) },
      body,
    });
    assert.equal(r.status, 202, r.text);
    return (await busRow(r.json["event_id"] as string))!.payload;
  };
  assert.deepEqual(await send(""), { body: {}, query: {} });
  assert.deepEqual(await send("", "application/json"), { body: {}, query: {} });
  assert.deepEqual(await send("name=a&x=1", "application/x-www-form-urlencoded"), { body: "name=a&x=1", query: {} });
  assert.deepEqual(await send("bytes without a content type"), { body: "bytes without a content type", query: {} });
  assert.deepEqual(await send('{"typed":[1,true,null]}'), { body: { typed: [1, true, null] }, query: {} });
  assert.deepEqual(await send("plain text, {not json}\n", "text/plain"), { body: "plain text, {not json}\n", query: {} });
  assert.deepEqual(await send('{"n":1.5,"z":null,"nested":{"b":false}}', "application/json", "?n=1&flag&empty=&n=2&s=a%20b"), {
    body: { n: 1.5, z: null, nested: { b: false } },
    query: { n: "1", flag: "", empty: "", s: "a b" },
  });
  assert.deepEqual(await send("[1,2,3]", "application/vnd.custom+json"), { body: [1, 2, 3], query: {} });
  const limit = 2 * 1024 * 1024;
  assert.equal(((await send(Buffer.alloc(limit, "a"), "text/plain")) as { body: string }).body.length, limit);
  const over = await http(hook.ingest_url, {
    headers: { "x-flow-hook-secret": hook.secret!, "content-type": "text/plain" },
    body: Buffer.alloc(limit + 1, "a"),
  });
  assert.equal(over.status, 413, over.text);
});

void test("forge deliveries: a good signature is accepted and shaped; bad, malformed and missing ones are 401 and record nothing", async () => {
  const key = "gh-webhook-key-Zq9";
  handedOut.push(key);
  const hook = await setHook(["gh", "--manifest", "github", "--key", key]);
  const forge = new TestForge({ url: hook.ingest_url, key });
  const push = forge.push({
    repo: "acme/web",
    sender: "alice",
    commits: [
      { message: "one", added: ["src/a.ts"] },
      { message: "two", modified: ["README.md"], removed: ["old.txt"] },
    ],
  });
  for (const signature of ["wrong", "malformed", "missing"] as const) {
    const r = await forge.send(push, { signature });
    assert.equal(r.status, 401, `${signature}: ${r.text}`);
    assert.match(r.text, /X-Hub-Signature-256/);
  }
  assert.equal(await countHookRows("gh"), 0);
  const ok = await forge.send(push);
  assert.equal(ok.status, 202, ok.text);
  assert.equal((ok.json as { event_type: string }).event_type, "gh.push");
  const row = (await busRow((ok.json as { event_id: string }).event_id))!;
  assert.equal(row.key, "acme/web");
  assert.equal(row.trusted, true);
  assert.equal(row.delivery_id, push.id);
  const body = JSON.parse(push.body.toString("utf8")) as { after: string };
  assert.deepEqual(row.payload, { body, query: {} });
  assert.deepEqual(row.fields, {
    ref: "refs/heads/main",
    sha: body.after,
    repo: "acme/web",
    sender: "alice",
    paths: ["README.md", "old.txt", "src/a.ts"],
    paths_known: true,
    forge: "github",
  });
  // Signatures are over the raw bytes: an indented body (which a re-serialisation would change) verifies.
  const pretty = forge.delivery("ping", { zen: "Keep it logically awesome.", repository: { full_name: "acme/web" } }, true);
  const pr = await forge.send(pretty);
  assert.equal(pr.status, 202, pr.text);
  assert.equal((pr.json as { event_type: string }).event_type, "gh.ping");
  // A correct signature with a wrong shared secret is still refused.
  assert.equal((await forge.send(forge.ping("acme/web"), { headers: { "x-flow-hook-secret": "fhs_wrong" } })).status, 401);
});

void test("a redelivery answers the same event_id, with one bus row and one handler run", async () => {
  const key = "redeliver-key-77";
  handedOut.push(key);
  const hook = await setHook(["redo", "--manifest", "github", "--key", key]);
  assert.equal(
    (
      await api("/handlers/redo-push", "PUT", {
        on: ["redo.push"],
        reaction: { kind: "script", source: "echo pushed\n", filename: "redo.sh" },
      })
    ).status,
    201,
  );
  const forge = new TestForge({ url: hook.ingest_url, key });
  const d = forge.push({ repo: "acme/api", sender: "bob", commits: [{ message: "fix" }] });
  const answers = [await forge.send(d), await forge.redeliver(d), ...(await Promise.all([forge.redeliver(d), forge.redeliver(d)]))];
  for (const a of answers) assert.equal(a.status, 202, a.text);
  const ids = new Set(answers.map((a) => (a.json as { event_id: string }).event_id));
  assert.equal(ids.size, 1);
  assert.equal((await db.query(`select 1 from events where delivery_id = $1`, [d.id])).rowCount, 1);
  assert.equal((await db.query(`select 1 from runs where event_id = $1`, [[...ids][0]])).rowCount, 1);
  // Concurrent first deliveries of one id also resolve to one event.
  const e = forge.push({ repo: "acme/api", sender: "bob", commits: [{ message: "race" }] });
  const raced = await Promise.all(Array.from({ length: 6 }, () => forge.send(e)));
  assert.equal(new Set(raced.map((a) => (a.json as { event_id: string }).event_id)).size, 1, raced.map((a) => a.text).join("\n"));
  assert.equal((await db.query(`select 1 from events where delivery_id = $1`, [e.id])).rowCount, 1);
  await api("/handlers/redo-push", "DELETE");
});

const waitForRun = async (id: string): Promise<{ status: string }> => {
  for (let i = 0; i < 600; i++) {
    const r = await api(`/runs/${id}`);
    if (["succeeded", "failed", "cancelled"].includes(r.json["status"] as string)) return r.json as { status: string };
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`run ${id} did not finish`);
};

const runsOf = async (eventId: string) =>
  (
    await db.query<{ id: string; handler_name: string; trusted: boolean }>(
      `select id, handler_name, trusted from runs where event_id = $1 order by handler_name`,
      [eventId],
    )
  ).rows;

void test("a fork's pull request runs without secrets, and a handler with credentials does not serve it; the same repo's does both", async () => {
  const key = "pr-key-5150";
  handedOut.push(key);
  const hook = await setHook(["prs", "--manifest", "github", "--key", key]);
  const reader = {
    on: ["prs.pull_request.*", "prs.issue_comment"],
    reaction: { kind: "script", source: 'echo "token=${API_TOKEN:-none}"\n', filename: "reader.sh" },
  };
  assert.equal((await api("/handlers/pr-reader", "PUT", reader)).status, 201);
  const withCred = {
    on: ["prs.pull_request.*"],
    reaction: { kind: "script", source: "echo deploying\n", filename: "deploy.sh" },
    credentials: { DEPLOY_TOKEN: "deploy-cred" },
  };
  assert.equal((await api("/handlers/pr-deploy", "PUT", withCred)).status, 201);
  const forge = new TestForge({ url: hook.ingest_url, key });

  const fork = await forge.send(forge.pullRequest({ repo: "acme/web", headRepo: "mallory/web", sender: "mallory", headRef: "patch-1" }));
  assert.equal(fork.status, 202, fork.text);
  const forkEvent = fork.json as { event_id: string; event_type: string };
  assert.equal(forkEvent.event_type, "prs.pull_request.opened");
  const forkRow = (await busRow(forkEvent.event_id))!;
  assert.equal(forkRow.trusted, false);
  assert.equal(forkRow.key, "acme/web");
  assert.equal(forkRow.fields?.["head_ref"], "patch-1");
  assert.equal(forkRow.fields?.["base_ref"], "main");
  const forkRuns = await runsOf(forkEvent.event_id);
  assert.deepEqual(
    forkRuns.map((r) => [r.handler_name, r.trusted]),
    [["pr-reader", false]],
  );
  assert.equal((await waitForRun(forkRuns[0]!.id)).status, "succeeded");
  const forkLog = (await api(`/runs/${forkRuns[0]!.id}/log`)).text;
  assert.match(forkLog, /token=none/);

  const comment = await forge.send(forge.issueComment({ repo: "acme/web", sender: "carol", association: "CONTRIBUTOR", body: "/deploy" }));
  assert.equal(comment.status, 202, comment.text);
  assert.equal((await busRow((comment.json as { event_id: string }).event_id))!.trusted, false);

  const own = await forge.send(forge.pullRequest({ repo: "acme/web", sender: "alice", headRef: "feature-x" }));
  assert.equal(own.status, 202, own.text);
  const ownEvent = own.json as { event_id: string };
  assert.equal((await busRow(ownEvent.event_id))!.trusted, true);
  const ownRuns = await runsOf(ownEvent.event_id);
  assert.deepEqual(
    ownRuns.map((r) => [r.handler_name, r.trusted]),
    [
      ["pr-deploy", true],
      ["pr-reader", true],
    ],
  );
  const reader2 = ownRuns.find((r) => r.handler_name === "pr-reader")!;
  assert.equal((await waitForRun(reader2.id)).status, "succeeded");
  const ownLog = (await api(`/runs/${reader2.id}/log`)).text;
  assert.match(ownLog, /token=\*\*\*/);
  await waitForRun(ownRuns.find((r) => r.handler_name === "pr-deploy")!.id);
  await api("/handlers/pr-reader", "DELETE");
  await api("/handlers/pr-deploy", "DELETE");
});

void test("a manual HMAC hook verifies its header (prefix stripped) and emits its name as the type", async () => {
  const key = "hmac-key-2718";
  handedOut.push(key);
  const hook = await setHook(["billing", "--hmac-header", "X-Signature", "--hmac-prefix", "sha256=", "--hmac-key", key]);
  assert.equal(hook.event_type, "billing");
  const body = Buffer.from('{"invoice":"in_1","amount":4200}');
  const { createHmac } = await import("node:crypto");
  const sig = createHmac("sha256", key).update(body).digest("hex");
  const ok = await http(hook.ingest_url, { headers: { "x-signature": `sha256=${sig}`, "content-type": "application/json" }, body });
  assert.equal(ok.status, 202, ok.text);
  assert.equal(ok.json["event_type"], "billing");
  for (const headers of [{}, { "x-signature": sig }, { "x-signature": "sha256=00" }] as Array<Record<string, string>>) {
    assert.equal((await http(hook.ingest_url, { headers, body })).status, 401);
  }
});

void test("set refuses unknown manifests naming the ones that exist, and incomplete or mixed modes", async () => {
  const gitlab = await server.cli(["event-hook", "set", "gl", "--manifest", "gitlab", "--key", "k"]);
  assert.notEqual(gitlab.code, 0);
  assert.match(gitlab.stderr, /unknown manifest "gitlab".*github/);
  for (const args of [
    ["none"],
    ["mixed", "--manifest", "github", "--key", "k", "--hmac-header", "X-S", "--hmac-key", "k"],
    ["nokey", "--manifest", "github"],
    ["run", "--event-type", "x.y"],
    ["reserved", "--event-type", "run.failed"],
  ]) {
    const r = await server.cli(["event-hook", "set", ...args]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
  }
});

void test("re-set keeps the secret; rotate mints a new one and the old one stops working at once", async () => {
  const first = await setHook(["rot", "--event-type", "rot.one"]);
  const post = (secret: string) => http(first.ingest_url, { headers: { "x-flow-hook-secret": secret }, body: "{}" });
  assert.equal((await post(first.secret!)).status, 202);
  const again = await setHook(["rot", "--event-type", "rot.two"]);
  assert.equal(again.secret, undefined);
  const kept = await post(first.secret!);
  assert.equal(kept.status, 202);
  assert.equal(kept.json["event_type"], "rot.two");
  const rotated = await server.cli(["event-hook", "rotate", "rot", "-o", "json"]);
  assert.equal(rotated.code, 0, rotated.stderr);
  const fresh = (JSON.parse(rotated.stdout) as HookJson).secret!;
  handedOut.push(fresh);
  assert.notEqual(fresh, first.secret);
  assert.equal((await post(first.secret!)).status, 401);
  assert.equal((await post(fresh)).status, 202);
  const rm = await server.cli(["event-hook", "rm", "rot"]);
  assert.equal(rm.code, 0, rm.stderr);
  assert.equal((await post(fresh)).status, 404);
});

void test("viewers list and show hooks; only admins set, rotate and remove them", async () => {
  const project = (await findProject(db, "default", "default"))!;
  const tokens: Record<string, string> = {};
  for (const role of ["viewer", "member"] as const) {
    const t = mintToken("flw");
    await createUserWithToken(
      db,
      { userId: mintId("usr"), tokenId: mintId("tok") },
      { name: `hooks-${role}`, projectId: project.projectId, role, tokenDigest: t.digest },
    );
    tokens[role] = t.token;
  }
  assert.equal((await api("/event-hooks", "GET", undefined, tokens["viewer"])).status, 200);
  assert.equal((await api("/event-hooks/deploys", "GET", undefined, tokens["viewer"])).status, 200);
  for (const token of [tokens["viewer"], tokens["member"]]) {
    assert.equal((await api("/event-hooks/x", "PUT", { event_type: "x.y" }, token)).status, 403);
    assert.equal((await api("/event-hooks/deploys/rotate", "POST", undefined, token)).status, 403);
    assert.equal((await api("/event-hooks/deploys", "DELETE", undefined, token)).status, 403);
  }
});

void test("no management answer and no line of server.log carries a hook secret or key", async () => {
  assert.ok(handedOut.length >= 5);
  const answers = [
    await api("/event-hooks"),
    ...(await Promise.all(["deploys", "gh", "prs", "billing", "shapes"].map((n) => api(`/event-hooks/${n}`)))),
  ];
  const cli = [
    await server.cli(["event-hook", "ls", "-o", "json"]),
    await server.cli(["event-hook", "show", "gh"]),
    await server.cli(["event-hook", "ls"]),
  ];
  const texts = [...answers.map((a) => a.text), ...cli.map((c) => c.stdout + c.stderr)];
  for (const text of texts) for (const s of handedOut) assert.ok(!text.includes(s), `a management answer carries ${s.slice(0, 6)}...`);
  const refused = await http("/api/v1/hooks/default/default/deploys?secret=fhs_query_value_never_logged", { body: "{}" });
  assert.equal(refused.status, 401);
  const readLog = () => readFile(join(server.dataDir, "server.log"), "utf8");
  await waitFor("the refusal in server.log (written asynchronously)", async () => /hook delivery refused/.test(await readLog()), 10_000);
  const log = await readLog();
  assert.match(log, /secret=\[redacted\]/);
  assert.ok(!log.includes("fhs_query_value_never_logged"));
  for (const s of handedOut) assert.ok(!log.includes(s), `server.log carries ${s.slice(0, 6)}...`);
});

void test("a hook changed by another replica: a delivery verified against this replica's stale copy is not recorded, and is verified again", async () => {
  const hook = await setHook(["replica", "--event-type", "replica.ping"]);
  const path = new URL(hook.ingest_url).pathname;
  const send = (secret: string) =>
    http(path, { headers: { "x-flow-hook-secret": secret, "content-type": "application/json" }, body: "{}" });
  assert.equal((await send(hook.secret!)).status, 202, "the first delivery caches the hook in this replica");
  // Another replica rotates the secret: it writes Postgres, not this replica's memory.
  const fresh = mintToken("flw");
  const project = await findProject(db, "default", "default");
  await db.query(`update event_hooks set secret_digest = $3 where project_id = $1 and name = $2`, [
    project!.projectId,
    "replica",
    fresh.digest,
  ]);
  const before = (await db.query<{ n: number }>(`select count(*)::int as n from events where hook_name = 'replica'`)).rows[0]!.n;
  const stale = await send(hook.secret!);
  assert.equal(stale.status, 401, stale.text);
  assert.match(stale.text, /X-Flow-Hook-Secret/);
  const now = await send(fresh.token);
  assert.equal(now.status, 202, now.text);
  const after = (await db.query<{ n: number }>(`select count(*)::int as n from events where hook_name = 'replica'`)).rows[0]!.n;
  assert.equal(after, before + 1, "only the delivery with the current secret was recorded");
});

void test("a delivery with a NUL character is refused with 400 and a clear message, and nothing is recorded", async () => {
  const hook = await setHook(["nul", "--event-type", "nul.ping"]);
  const path = new URL(hook.ingest_url).pathname;
  const r = await http(path, {
    headers: { "x-flow-hook-secret": hook.secret!, "content-type": "application/json" },
    body: '{"text":"a\\u0000b"}',
  });
  assert.equal(r.status, 400, r.text);
  assert.match(r.text, /body\.text holds a NUL character/);
  const { rows } = await db.query<{ n: number }>(`select count(*)::int as n from events where hook_name = 'nul'`);
  assert.equal(rows[0]!.n, 0);
});
