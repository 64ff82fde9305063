/**
 * The compiled `flow` binary against a scripted stand-in for the user API: what each command
 * sends, what it prints where, and its exit status.
 */
import assert from "node:assert/strict";
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, beforeEach, test } from "node:test";
import { parse as parseYaml } from "yaml";
import { freshHome, removeHomes, runFlow, startFakeFlowsvc } from "./fake-flowsvc.js";
import type { FakeFlowsvc } from "./fake-flowsvc.js";

const SCOPED = "/api/v1/orgs/acme/projects/web";
const RUN_ID = "run-01jd8k2m3n4p5q6r7s8t9v0w1x";
const TOKEN = "tok-secret-abc";

let api: FakeFlowsvc;
let env: Record<string, string>;

before(async () => {
  api = await startFakeFlowsvc();
});
after(async () => {
  await api.stop();
  await removeHomes();
});
beforeEach(async () => {
  api.routes.clear();
  api.seen.length = 0;
  const { home, configPath } = await freshHome();
  env = { HOME: home, FLOWSVC_CONFIG: configPath, FLOWSVC_URL: api.url, FLOWSVC_TOKEN: TOKEN, FLOWSVC_PROJECT: "acme/web" };
});

const run = (status: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: RUN_ID,
  status,
  substate: null,
  deadline: null,
  filename: "build.sh",
  tags: [],
  created_at: new Date(Date.now() - 120_000).toISOString(),
  started_at: null,
  finished_at: null,
  output: null,
  error: null,
  annotations: [],
  ...extra,
});

const script = async (name: string, text: string): Promise<string> => {
  const path = join(env.HOME ?? "", name);
  await writeFile(path, text);
  return path;
};

void test("submit prints only the run id and sends the documented body with the bearer token", async () => {
  api.routes.set(`POST ${SCOPED}/runs`, () => ({ status: 201, json: run("queued") }));
  const file = await script("build.sh", "echo hi\n");
  const r = await runFlow(
    [
      "submit",
      file,
      "--env",
      "A=1",
      "--env",
      "B=x=y",
      "--tag",
      "ci",
      "--tag",
      "nightly",
      "--idempotency-key",
      "k1",
      "--interpreter",
      " bash  -x ",
    ],
    { env },
  );
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, `${RUN_ID}\n`);
  assert.equal(r.stderr, "");
  const [req] = api.seen;
  assert.equal(req?.authorization, `Bearer ${TOKEN}`);
  assert.deepEqual(req?.body, {
    kind: "script",
    source: "echo hi\n",
    filename: "build.sh",
    interpreter: ["bash", "-x"],
    env: { A: "1", B: "x=y" },
    idempotency_key: "k1",
    tags: ["ci", "nightly"],
  });
});

void test("a duplicate submit prints the first run's id on stdout, says so on stderr, and exits 0", async () => {
  api.routes.set(`POST ${SCOPED}/runs`, () => ({ status: 200, json: { id: RUN_ID, duplicate: true } }));
  const r = await runFlow(["submit", await script("a.sh", "true\n"), "--idempotency-key", "k1"], { env });
  assert.equal(r.code, 0);
  assert.equal(r.stdout, `${RUN_ID}\n`);
  assert.equal(r.stderr, `duplicate: run ${RUN_ID} was already submitted under this idempotency key\n`);
});

const followRoutes = (finalStatus: string, log: string[]): void => {
  api.routes.set(`POST ${SCOPED}/runs`, () => ({ status: 201, json: run("queued") }));
  api.routes.set(`GET ${SCOPED}/runs/${RUN_ID}/log`, () => ({
    stream: async (res) => {
      for (const line of log) {
        res.write(line);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
  }));
  api.routes.set(`GET ${SCOPED}/runs/${RUN_ID}`, () => ({
    status: 200,
    json: run(finalStatus, { error: finalStatus === "failed" ? "exit status 3" : null }),
  }));
};

void test("submit --follow streams the log to stdout, the id to stderr, and exits 0 when the run succeeds", async () => {
  followRoutes("succeeded", ["one\n", "two\n"]);
  const r = await runFlow(["submit", await script("a.sh", "true\n"), "--follow"], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "one\ntwo\n");
  assert.match(r.stderr, new RegExp(RUN_ID));
  assert.equal(api.seen[1]?.url, `${SCOPED}/runs/${RUN_ID}/log?follow=1`);
});

for (const status of ["failed", "cancelled"]) {
  void test(`submit --follow exits 1 when the run is ${status}`, async () => {
    followRoutes(status, ["boom\n"]);
    const r = await runFlow(["submit", await script("a.sh", "false\n"), "--follow"], { env });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, "boom\n");
    assert.match(r.stderr, new RegExp(`run ${RUN_ID} ${status}`));
  });
}

void test("follow copies the log as it arrives, without waiting for the end", async () => {
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  api.routes.set(`GET ${SCOPED}/runs/${RUN_ID}/log`, () => ({
    stream: async (res) => {
      res.write("first\n");
      await released; // held until the CLI has printed "first"
      res.write("second\n");
    },
  }));
  api.routes.set(`GET ${SCOPED}/runs/${RUN_ID}`, () => ({ status: 200, json: run("succeeded") }));
  const r = await runFlow(["follow", RUN_ID], { env, onStdout: (chunk) => chunk.includes("first") && release() });
  assert.equal(r.code, 0);
  assert.equal(r.stdout, "first\nsecond\n");
});

void test("runs ls -o json prints one array with the API's field names, and sends the filters", async () => {
  const runs = [run("failed", { tags: ["ci"] }), run("succeeded", { id: "run-2" })];
  api.routes.set(`GET ${SCOPED}/runs`, () => ({ status: 200, json: { runs } }));
  const r = await runFlow(["runs", "ls", "--status", "failed", "--tag", "ci", "--limit", "5", "-o", "json"], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), runs);
  assert.equal(api.seen[0]?.url, `${SCOPED}/runs?status=failed&tag=ci&limit=5`);
});

void test("runs ls -o yaml is one YAML document; the default is an aligned table", async () => {
  const runs = [run("parked", { substate: { name: "wait-signal:approve", kind: "signal" } }), run("succeeded", { id: "run-2" })];
  api.routes.set(`GET ${SCOPED}/runs`, () => ({ status: 200, json: runs }));
  const yaml = await runFlow(["runs", "ls", "-o", "yaml"], { env });
  assert.deepEqual(parseYaml(yaml.stdout), runs);
  const table = await runFlow(["runs", "ls"], { env });
  const [header, first, second] = table.stdout.split("\n");
  assert.match(header ?? "", /^ID\s+STATUS\s+SUBSTATE\s+FILE\s+TAGS\s+CREATED\s+DURATION$/);
  assert.match(first ?? "", /parked\s+wait-signal:approve\s+build\.sh\s+-\s+2m ago/);
  assert.equal(header?.indexOf("STATUS"), second?.indexOf("succeeded"));
});

void test("status shows the substate name, and -o json is the run as the API sent it", async () => {
  const parked = run("parked", { substate: { name: "lock:deploy", kind: "lock" }, output: { url: "x" } });
  api.routes.set(`GET ${SCOPED}/runs/${RUN_ID}`, () => ({ status: 200, json: parked }));
  const table = await runFlow(["status", RUN_ID], { env });
  assert.equal(table.code, 0);
  assert.match(table.stdout, /^status:\s+parked$/m);
  assert.match(table.stdout, /^substate:\s+lock:deploy \(lock\)$/m);
  assert.match(table.stdout, /^created:\s+\d{4}-\d\d-\d\dT.* \(2m ago\)$/m);
  const json = await runFlow(["status", RUN_ID, "-o", "json"], { env });
  assert.deepEqual(JSON.parse(json.stdout), parked);
});

void test("steps shows name#ordinal, the exit code and the bytes of output", async () => {
  const steps = [
    { position: 0, kind: "step", name: "build", ordinal: 0, status: "done", exit_code: 0, output_bytes: 6 },
    { position: 1, kind: "sleep", name: "", ordinal: 0, status: "pending", exit_code: null, output_bytes: null },
    {
      position: 2,
      kind: "step",
      name: "raw",
      ordinal: 1,
      status: "done",
      result: { stdout_b64: Buffer.from("hello\n").toString("base64"), exit: 3 },
    },
  ];
  api.routes.set(`GET ${SCOPED}/runs/${RUN_ID}/steps`, () => ({ status: 200, json: steps }));
  const r = await runFlow(["steps", RUN_ID], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^0\s+step\s+build#0\s+done\s+0\s+6$/m);
  assert.match(r.stdout, /^1\s+sleep\s+#0\s+pending\s+-\s+-$/m);
  assert.match(r.stdout, /^2\s+step\s+raw#1\s+done\s+3\s+6$/m);
});

void test("secret set - reads stdin, strips one newline, and never prints the value", async () => {
  api.routes.set(`PUT ${SCOPED}/secrets/API_TOKEN`, () => ({ status: 200, json: { name: "API_TOKEN", set_at: new Date().toISOString() } }));
  const r = await runFlow(["secret", "set", "API_TOKEN", "-"], { env, stdin: "s3cr3t-value\n\n" });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(api.seen[0]?.body, { value: "s3cr3t-value\n" });
  assert.doesNotMatch(r.stdout + r.stderr, /s3cr3t/);
});

void test("secret list and get show names and set times only; get of a missing secret exits 1", async () => {
  const setAt = new Date(Date.now() - 3_600_000).toISOString();
  api.routes.set(`GET ${SCOPED}/secrets`, () => ({ status: 200, json: [{ name: "API_TOKEN", set_at: setAt }] }));
  api.routes.set(`GET ${SCOPED}/secrets/API_TOKEN`, () => ({ status: 200, json: { name: "API_TOKEN", exists: true, set_at: setAt } }));
  api.routes.set(`GET ${SCOPED}/secrets/NOPE`, () => ({ status: 200, json: { name: "NOPE", exists: false, set_at: null } }));
  const list = await runFlow(["secret", "list"], { env });
  assert.match(list.stdout, /^NAME\s+SET\nAPI_TOKEN\s+1h ago\n$/);
  const got = await runFlow(["secret", "get", "API_TOKEN"], { env });
  assert.equal(got.code, 0);
  assert.match(got.stdout, /^API_TOKEN {2}set \d{4}-.*\(1h ago\)\n$/);
  const missing = await runFlow(["secret", "get", "NOPE", "-o", "json"], { env });
  assert.equal(missing.code, 1);
  assert.deepEqual(JSON.parse(missing.stdout), { name: "NOPE", exists: false, set_at: null });
});

void test("secret rm sends DELETE and confirms on stderr", async () => {
  api.routes.set(`DELETE ${SCOPED}/secrets/API_TOKEN`, () => ({ status: 204 }));
  const r = await runFlow(["secret", "rm", "API_TOKEN"], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "");
  assert.equal(r.stderr, "secret API_TOKEN removed\n");
});

void test("a 401 says how to log in", async () => {
  api.routes.set(`GET ${SCOPED}/runs`, () => ({ status: 401, json: { error: { code: "unauthenticated", message: "unknown token" } } }));
  const r = await runFlow(["runs", "ls"], { env });
  assert.equal(r.code, 1);
  assert.equal(
    r.stderr,
    `error: unknown token\nrun \`flow login --url ${api.url} --token <token>\` or set FLOWSVC_TOKEN (the token \`flow server\` printed at first start)\n`,
  );
});

void test("the server's error and hint are printed as sent, with the exit status of the code", async () => {
  api.routes.set(`PUT ${SCOPED}/secrets/X`, () => ({
    status: 403,
    json: { error: { code: "forbidden", message: "setting a secret needs admin", hint: "ask an admin" } },
  }));
  const forbidden = await runFlow(["secret", "set", "X", "v"], { env });
  assert.equal(forbidden.code, 1);
  assert.equal(forbidden.stderr, "error: setting a secret needs admin\nask an admin\n");
  api.routes.set(`POST ${SCOPED}/events`, () => ({
    status: 400,
    json: { error: { code: "invalid_argument", message: "type: reserved" } },
  }));
  const invalid = await runFlow(["emit", "run.started"], { env });
  assert.equal(invalid.code, 2);
  assert.match(invalid.stderr, /^error: type: reserved\n/);
});

void test("emit posts type, key and payload and prints only the event id", async () => {
  api.routes.set(`POST ${SCOPED}/events`, () => ({ status: 201, json: { id: "evt-1", type: "deploy.done" } }));
  const r = await runFlow(["emit", "deploy.done", "--key", "acme/web", "--payload", '{"ok":true}'], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "evt-1\n");
  assert.deepEqual(api.seen[0]?.body, { type: "deploy.done", key: "acme/web", payload: { ok: true } });
  await runFlow(["emit", "bare"], { env });
  assert.deepEqual(api.seen[1]?.body, { type: "bare", payload: null });
});

void test("a number past double range (1e400) in --payload, --input, --config or a graph file is refused, not sent as null", async () => {
  api.routes.set(`POST ${SCOPED}/events`, () => ({ status: 201, json: { id: "evt-1", type: "t" } }));
  const graph = await script(
    "big.json",
    '{"version":"flowsvc-graph/v1","nodes":[{"id":"e","type":"emit","config":{"type":"x.y","payload":{"n":1e400}}}],"edges":[]}',
  );
  const cases: Array<[string[], RegExp]> = [
    [["emit", "t", "--payload", "1e400"], /argument '1e400' is invalid\. the value is a number outside the range/],
    [["emit", "t", "--payload", '{"a":[1,-1e999]}'], /a\[1\] is a number outside the range a JSON number can be stored in/],
    [["signal", RUN_ID, "go", "--payload", '{"n":1e400}'], /argument '\{"n":1e400\}' is invalid\. n is a number outside/],
    [["submit", graph, "--input", '{"deep":{"x":1E400}}'], /^error: --input: deep\.x is a number outside/],
    [
      ["handler", "set", "h", "--node", "emit", "--on", "a", "--config", '{"payload":{"n":1e400}}'],
      /^error: --config: payload\.n is a number outside/,
    ],
    [["graph", "set", "g", graph], /big\.json: nodes\[0\]\.config\.payload\.n is a number outside/],
  ];
  for (const [args, message] of cases) {
    const r = await runFlow(args, { env });
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, message, args.join(" "));
  }
  assert.equal(api.seen.length, 0, "nothing was sent");
  const ok = await runFlow(["emit", "t", "--payload", '{"n":1e308,"m":-5e-324}'], { env });
  assert.equal(ok.code, 0, ok.stderr);
  assert.deepEqual(api.seen[0]?.body, { type: "t", payload: { n: 1e308, m: -5e-324 } });
});

void test("emit against a server without the route fails cleanly with exit 1", async () => {
  const r = await runFlow(["emit", "deploy.done"], { env });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^error: no route POST .*\n.*upgrade the server/);
});

void test("events ls and show print the bus records", async () => {
  const event = {
    id: "evt-1",
    type: "deploy.done",
    key: "acme/web",
    payload: { ok: true },
    created_at: new Date().toISOString(),
    source_run_id: RUN_ID,
  };
  api.routes.set(`GET ${SCOPED}/events`, () => ({ status: 200, json: { events: [event] } }));
  api.routes.set(`GET ${SCOPED}/events/evt-1`, () => ({ status: 200, json: event }));
  const list = await runFlow(["events", "ls", "--type", "deploy.done"], { env });
  assert.match(list.stdout, /^evt-1\s+deploy\.done\s+acme\/web\s+\d+s ago\s+\{"ok":true\}$/m);
  assert.equal(api.seen[0]?.url, `${SCOPED}/events?type=deploy.done`);
  const show = await runFlow(["events", "show", "evt-1"], { env });
  assert.match(show.stdout, /^source_run_id:\s+run-/m);
  assert.match(show.stdout, /^payload:\s+\{\n\s+"ok": true\n\s+\}$/m);
  const json = await runFlow(["events", "show", "evt-1", "-o", "json"], { env });
  assert.deepEqual(JSON.parse(json.stdout), event);
});

void test("login checks the token, saves url, token and project 0600, and later commands use them", async () => {
  api.routes.set("GET /api/v1/whoami", () => ({
    status: 200,
    json: { user: "alice", projects: [{ org: "acme", project: "web", role: "admin" }] },
  }));
  const { FLOWSVC_URL: _u, FLOWSVC_TOKEN: _t, FLOWSVC_PROJECT: _p, ...bare } = env;
  const r = await runFlow(["login", "--url", api.url, "--token", TOKEN], { env: bare });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, `logged in to ${api.url} as alice; project acme/web (admin)\n`);
  const path = bare.FLOWSVC_CONFIG ?? "";
  assert.deepEqual(JSON.parse(await readFile(path, "utf8")), { url: api.url, token: TOKEN, project: "acme/web" });
  assert.equal((await stat(path)).mode & 0o777, 0o600);
  api.routes.set(`GET ${SCOPED}/runs`, () => ({ status: 200, json: [] }));
  const later = await runFlow(["runs", "ls"], { env: bare });
  assert.equal(later.code, 0, later.stderr);
  assert.equal(api.seen.at(-1)?.authorization, `Bearer ${TOKEN}`);
});

void test("login with a token the server refuses saves nothing", async () => {
  api.routes.set("GET /api/v1/whoami", () => ({ status: 401, json: { error: { code: "unauthenticated", message: "unknown token" } } }));
  const r = await runFlow(["login", "--token", "wrong"], { env });
  assert.equal(r.code, 1);
  await assert.rejects(stat(env.FLOWSVC_CONFIG ?? ""));
});

void test("login refuses a URL with a password, a query or the API's path before sending anything, and never echoes the password", async () => {
  const { FLOWSVC_URL: _u, FLOWSVC_TOKEN: _t, FLOWSVC_PROJECT: _p, ...bare } = env;
  const base = new URL(api.url);
  const cases: [string, RegExp][] = [
    [`http://ann:hunter2@${base.host}`, /must not carry a user name or password/],
    [`http://ann@${base.host}`, /must not carry a user name or password/],
    [`http://%00:%F0@${base.host}`, /must not carry a user name or password/],
    [`${api.url}/api/v1`, /without \/api\/v1/],
    [`${api.url}/api/v1/`, /without \/api\/v1/],
    [`${api.url}/?token=x`, /must not carry a query or fragment/],
    [`${api.url}/#x`, /must not carry a query or fragment/],
    ["ftp://127.0.0.1:1", /must be an http:\/\/ or https:\/\/ URL/],
  ];
  for (const [url, message] of cases) {
    const r = await runFlow(["login", "--url", url, "--token", TOKEN], { env: bare });
    assert.equal(r.code, 2, `${url}: ${r.stderr}`);
    assert.match(r.stderr, message, url);
    assert.doesNotMatch(r.stdout + r.stderr, /hunter2/, url);
    const viaEnv = await runFlow(["login", "--token", TOKEN], { env: { ...bare, FLOWSVC_URL: url } });
    assert.equal(viaEnv.code, 2, `FLOWSVC_URL=${url}: ${viaEnv.stderr}`);
    assert.match(viaEnv.stderr, message, url);
    assert.doesNotMatch(viaEnv.stdout + viaEnv.stderr, /hunter2/, url);
  }
  assert.equal(api.seen.length, 0, "nothing was sent");
  await assert.rejects(stat(bare.FLOWSVC_CONFIG ?? ""));
});
