/**
 * Graph runs end to end (issue 10, items 2-3), with the real `flow` CLI, one real `flow server` for
 * the file, its agents, and a local HTTP peer that records every request it gets: a DAG with
 * parallel branches and an `if` skip; `$expr` and `$template`; the http node with each credential
 * kind and header precedence; fail-closed on a missing and a dynamically named credential (the peer
 * sees nothing); code and shell nodes with a credential variable (masked in the log); retry with
 * backoff; and a server killed with SIGKILL mid-graph, restarted on the same data: no finished node
 * runs again.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { readFile, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { startTestServer, type TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { ended, ok, runIdIn, runKit, storedLog } from "./support/runs.js";
import pg from "pg";
import { waitFor } from "./support/wait.js";

const TOKEN = "graph-Bearer-tok-8812";
const KEY = "graph-api-Key-3307";
const PASSWORD = "graph-Basic-pw-5521";
const URLTOK = "graph/url?tok#9090";

interface Seen {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: string;
}

/** The local peer: records each request; `/status/<n>` answers n, `/slow/<ms>` answers after ms, `/flaky/<k>` fails twice per key then answers 200. */
class Peer {
  readonly seen: Seen[] = [];
  readonly #flaky = new Map<string, number>();
  #server: Server | undefined;
  #open: Array<() => void> = [];
  url = "";

  async start(): Promise<void> {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const path = req.url ?? "/";
        this.seen.push({ method: req.method ?? "", path, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
        const reply = (code: number, body: unknown): void =>
          void res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(body));
        const status = /^\/status\/(\d+)/.exec(path);
        if (status) return reply(Number(status[1]), { status: Number(status[1]) });
        const flaky = /^\/flaky\/([\w-]+)/.exec(path);
        if (flaky) {
          const n = (this.#flaky.get(flaky[1]!) ?? 0) + 1;
          this.#flaky.set(flaky[1]!, n);
          return reply(n <= 2 ? 503 : 200, { try: n });
        }
        if (path.startsWith("/hold")) return void this.#open.push(() => reply(200, { held: true }));
        reply(200, { ok: true, echo: { n: 7, word: "seven" } });
      });
    });
    await new Promise<void>((r) => this.#server!.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** Answers every request held at /hold. */
  release(): void {
    for (const r of this.#open.splice(0)) r();
  }

  count(prefix: string): number {
    return this.seen.filter((s) => s.path.startsWith(prefix)).length;
  }

  async stop(): Promise<void> {
    this.release();
    this.#server?.closeAllConnections();
    await new Promise<void>((r) => this.#server?.close(() => r()) ?? r());
  }
}

let server: TestServer;
let dir: string;
const peer = new Peer();
const kit = runKit(
  () => server,
  () => dir,
);

interface NodeView {
  node_id: string;
  status: string;
  attempt: number;
  output: Record<string, unknown> | null;
  error: string | null;
}
interface GraphView {
  status: string;
  error: string | null;
  output: Record<string, unknown> | null;
  nodes: NodeView[];
}

const graph = (nodes: unknown[], edges: Array<[string, string]> = []): string =>
  JSON.stringify({ version: "flowsvc-graph/v1", nodes, edges: edges.map(([from, to]) => ({ from, to })) });

/** Waits for the run to end with `want`; the whole run view in the message otherwise. */
const endsAs = async (run: string, want: string): Promise<GraphView> => {
  const status = await ended(server, run);
  const v = await view(run);
  assert.equal(status, want, JSON.stringify(v, null, 2));
  return v;
};

/** Submits a graph (a .json file) and answers its run id. */
const submitGraph = async (name: string, doc: string, args: string[] = []): Promise<string> =>
  runIdIn(ok(await server.cli(["submit", await kit.script(`${name}.json`, doc), ...args])).stdout);

const view = (run: string): Promise<GraphView> => kit.json<GraphView>(["status", run]);
const node = (v: GraphView, id: string): NodeView => {
  const n = v.nodes.find((x) => x.node_id === id);
  assert.ok(n, `no node ${id} in ${JSON.stringify(v.nodes)}`);
  return n;
};

before(async () => {
  await peer.start();
  server = await startTestServer({ agents: 4 });
  dir = await scriptDir("flowsvc-graphs-");
  for (const [args, input] of [
    [["tok", "--kind", "bearer", "--token", "-"], TOKEN],
    [["key", "--kind", "api-key", "--header", "x-api-key", "--value", KEY], ""],
    [["basic", "--kind", "basic", "--username", "ci", "--password", "-"], PASSWORD],
    [["urltok", "--kind", "url-token", "--token", "-"], URLTOK],
  ] as const)
    ok(await server.cli(["credential", "set", ...args], { input }));
});

after(async () => {
  await server?.stop();
  await peer.stop();
  await rm(dir, { recursive: true, force: true });
});

void test("a DAG: parallel branches, an if skip that still satisfies its dependents, $expr and $template, a code node's output", async () => {
  const doc = graph(
    [
      { id: "start", type: "http", config: { url: `${peer.url}/start`, method: "POST", body: { from: { $expr: "input.who" } } } },
      { id: "left", type: "http", config: { url: { $template: `${peer.url}/left/{{ nodes.start.output.body.echo.word }}` } } },
      { id: "right", type: "code", config: { source: 'echo "right ran"\nflow output set answer=42\n' } },
      { id: "never", type: "http", if: "input.who == 'nobody'", config: { url: `${peer.url}/never` } },
      {
        id: "join",
        type: "http",
        config: {
          url: `${peer.url}/join`,
          method: "POST",
          body: {
            answer: { $expr: "nodes.right.output.answer" },
            skipped: { $expr: "nodes.never.status" },
            n: { $expr: "nodes.left.output.body.echo.n + 1.0" },
          },
        },
      },
    ],
    [
      ["start", "left"],
      ["start", "right"],
      ["start", "never"],
      ["left", "join"],
      ["right", "join"],
      ["never", "join"],
    ],
  );
  const run = await submitGraph("dag", doc, ["--input", '{"who":"ada"}']);
  const v = await endsAs(run, "succeeded");
  assert.deepEqual(
    v.nodes.map((n) => [n.node_id, n.status, n.attempt]),
    [
      ["start", "success", 1],
      ["left", "success", 1],
      ["right", "success", 1],
      ["never", "skipped", 0],
      ["join", "success", 1],
    ],
  );
  assert.equal(peer.count("/never"), 0);
  assert.deepEqual(JSON.parse(peer.seen.find((s) => s.path === "/start")!.body), { from: "ada" });
  assert.equal(peer.count("/left/seven"), 1);
  assert.deepEqual(JSON.parse(peer.seen.find((s) => s.path === "/join")!.body), { answer: "42", skipped: "skipped", n: 8 });
  const right = node(v, "right").output!;
  assert.equal(right["exit_code"], 0);
  assert.equal(right["answer"], "42");
  assert.match(String(right["stdout"]), /right ran/);
  assert.deepEqual(Object.keys(v.output?.["nodes"] as object), ["join"]);
  const steps = ok(await server.cli(["steps", run])).stdout;
  assert.match(steps, /^NODE\s+TYPE\s+STATUS\s+ATTEMPT\s+OUTPUT/m);
  assert.match(steps, /^never\s+http\s+skipped\s+0\s+-$/m);
  assert.match(steps, /^right\s+code\s+success\s+1\s+\{"answer":"42"/m);
  assert.match(ok(await server.cli(["status", run])).stdout, /join {2}http {2}success/);
});

void test("http credentials: each kind reaches the peer as its auth, an explicit header wins, nothing leaks into the run", async () => {
  const get = (id: string, path: string, extra: Record<string, unknown> = {}): unknown => ({
    id,
    type: "http",
    config: { url: `${peer.url}${path}`, ...extra },
  });
  const doc = graph([
    get("bearer", "/auth/bearer", { credential: "tok" }),
    get("apikey", "/auth/apikey", { credential: "key" }),
    get("basic", "/auth/basic", { credential: "basic" }),
    get("urltok", "/auth/url/{credential}/x", { credential: "urltok" }),
    get("explicit", "/auth/explicit", { credential: "tok", headers: { authorization: "Custom mine" } }),
  ]);
  const run = await submitGraph("auth", doc);
  const v = await endsAs(run, "succeeded");
  const seen = (path: string): Seen => {
    const s = peer.seen.find((x) => x.path.startsWith(path));
    assert.ok(s, `the peer saw no ${path}`);
    return s;
  };
  assert.equal(seen("/auth/bearer").headers.authorization, `Bearer ${TOKEN}`);
  assert.equal(seen("/auth/apikey").headers["x-api-key"], KEY);
  assert.equal(seen("/auth/basic").headers.authorization, `Basic ${Buffer.from(`ci:${PASSWORD}`).toString("base64")}`);
  assert.equal(seen("/auth/url/").path, `/auth/url/${encodeURIComponent(URLTOK)}/x`);
  assert.equal(seen("/auth/explicit").headers.authorization, "Custom mine");
  const shown = JSON.stringify(v);
  for (const secret of [TOKEN, KEY, PASSWORD, encodeURIComponent(URLTOK)]) assert.ok(!shown.includes(secret), `the run shows ${secret}`);
});

void test("fail closed: a missing credential is refused at submit naming the node; a dynamic name that matches nothing fails its node and nothing is sent", async () => {
  const before = peer.seen.length;
  const refused = await server.cli([
    "submit",
    await kit.script("missing.json", graph([{ id: "call", type: "http", config: { url: `${peer.url}/missing`, credential: "nope" } }])),
  ]);
  assert.equal(refused.code, 2, refused.stderr);
  assert.match(refused.stderr, /node call: credential "nope" is missing/);
  const dynamic = graph(
    [
      { id: "call", type: "http", config: { url: `${peer.url}/dynamic`, credential: { $expr: "input.cred" } } },
      { id: "after", type: "http", config: { url: `${peer.url}/after-dynamic` } },
    ],
    [["call", "after"]],
  );
  // The name is a credential's value (a mistake a user makes): the error quoting it is masked, stored too.
  const run = await submitGraph("dynamic", dynamic, ["--input", JSON.stringify({ cred: TOKEN })]);
  const v = await endsAs(run, "failed");
  assert.equal(node(v, "call").status, "failed");
  assert.match(node(v, "call").error ?? "", /credential "\*\*\*" is not set in this project/);
  assert.equal(node(v, "after").status, "cancelled");
  assert.equal(peer.seen.length, before, "the peer got a request");
  // The run's error and its run.failed event are masked before they are stored, as a script's are.
  const db = new pg.Pool({ connectionString: server.databaseUrl, max: 1 });
  try {
    const stored = await db.query<{ error: string }>(`select error from runs where id = $1`, [run]);
    assert.match(stored.rows[0]!.error, /^node call failed: credential "\*\*\*" is not set/);
    const failedEvents = await db.query<{ payload: { error: string } }>(
      `select payload from events where type = 'run.failed' and payload->>'run_id' = $1`,
      [run],
    );
    assert.equal(failedEvents.rows.length, 1);
    assert.match(failedEvents.rows[0]!.payload.error, /^node call failed: credential "\*\*\*" is not set/);
  } finally {
    await db.end();
  }
});

void test("code and shell nodes get their credentials as variables, masked in the log and the output; a missing one fails before the script runs", async () => {
  const marker = `${dir}/missing-ran`;
  const doc = graph([
    {
      id: "code",
      type: "code",
      config: { source: 'echo "token=$GH"\nprintf "%s" "$GH" | sha256sum | cut -c1-16\n', credentials: { GH: "tok" } },
    },
    { id: "shell", type: "shell", config: { command: 'echo "key=$K"', credentials: { K: "key" } } },
  ]);
  const run = await submitGraph("creds", doc);
  const v = await endsAs(run, "succeeded");
  const log = ok(await server.cli(["follow", run])).stdout;
  const sha = (await import("node:crypto")).createHash("sha256").update(TOKEN).digest("hex").slice(0, 16);
  assert.match(log, /token=\*\*\*/);
  assert.match(log, /key=\*\*\*/);
  assert.ok(log.includes(sha), "the script did not get the token");
  for (const s of [TOKEN, KEY]) assert.ok(!log.includes(s) && !JSON.stringify(v).includes(s), `${s} leaked`);
  assert.match(String(node(v, "code").output?.["stdout"]), /token=\*\*\*/);
  // Declared but not stored: the claim fails the node's job; the script never runs.
  const missing = graph([
    { id: "code", type: "code", config: { source: `touch ${marker}\n`, credentials: { GH: "tok", X: "not-stored" } } },
  ]);
  const refused = await server.cli(["submit", await kit.script("code-missing.json", missing)]);
  assert.equal(refused.code, 2, "a named credential is checked at submit");
  assert.match(refused.stderr, /node code: credential "not-stored" is missing/);
});

void test("flow submit graph.json --follow: streams the run's log, and exits 0 when the graph succeeds, 1 when a node fails", async () => {
  const good = graph([{ id: "hello", type: "code", config: { source: 'echo "follow-hello-5150"\n' } }]);
  const passed = await server.cli(["submit", await kit.script("follow-ok.json", good), "--follow"]);
  assert.equal(passed.code, 0, passed.stderr);
  assert.match(passed.stdout, /follow-hello-5150/);
  const bad = graph([{ id: "boom", type: "code", config: { source: 'echo "follow-boom-6160"\nexit 3\n' } }]);
  const failed = await server.cli(["submit", await kit.script("follow-bad.json", bad), "--follow"]);
  assert.equal(failed.code, 1, `${failed.stdout}\n${failed.stderr}`);
  assert.match(failed.stdout, /follow-boom-6160/);
  const v = await view(runIdIn(failed.stdout + failed.stderr));
  assert.deepEqual([v.status, node(v, "boom").status], ["failed", "failed"]);
});

void test("a code node's timeout ends its job and fails the attempt with a timeout error; retry applies; a node within its timeout succeeds", async () => {
  const pids = `${dir}/timeout-pids`;
  const doc = graph([
    {
      id: "slow",
      type: "code",
      retry: { attempts: 2, backoff: "100ms" },
      config: { source: `echo "slow-started"\necho $$ >> ${pids}\nexec sleep 30\n`, timeout: "300ms" },
    },
    { id: "quick", type: "shell", config: { command: "echo quick-done", timeout: "30s" } },
  ]);
  const run = await submitGraph("timeout", doc);
  const v = await endsAs(run, "failed");
  assert.deepEqual([node(v, "slow").status, node(v, "slow").attempt], ["failed", 2]);
  assert.match(node(v, "slow").error ?? "", /^timed out after 300ms \(config\.timeout\): the job was ended$/);
  assert.equal(node(v, "quick").status, "success");
  assert.match(v.error ?? "", /node slow failed: timed out after 300ms/);
  // Each attempt's script (exec'd into its sleep) is stopped, not left running on the agent.
  const started = (await readFile(pids, "utf8")).trim().split("\n").map(Number);
  assert.equal(started.length, 2);
  const alive = (pid: number): boolean => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  await waitFor("the timed-out scripts to end", () => started.every((pid) => !alive(pid)), 10_000);
});

void test("retry: a failing http node runs again after its backoff until it succeeds; exhausted, the node fails and keeps the response", async () => {
  const doc = graph([
    { id: "flaky", type: "http", retry: { attempts: 3, backoff: "200ms" }, config: { url: `${peer.url}/flaky/a` } },
    { id: "broken", type: "http", retry: { attempts: 2, backoff: "100ms" }, config: { url: `${peer.url}/status/500` } },
  ]);
  const run = await submitGraph("retry", doc);
  const v = await endsAs(run, "failed");
  assert.deepEqual([node(v, "flaky").status, node(v, "flaky").attempt], ["success", 3]);
  assert.equal(peer.count("/flaky/a"), 3);
  assert.deepEqual([node(v, "broken").status, node(v, "broken").attempt], ["failed", 2]);
  assert.equal(node(v, "broken").output?.["status"], 500);
  assert.match(node(v, "broken").error ?? "", /HTTP 500/);
  assert.match(v.error ?? "", /node broken failed/);
});

void test("switch routes by exact CEL, a parked node waits for its signal, emit records its event", async () => {
  const doc = graph(
    [
      {
        id: "route",
        type: "switch",
        config: {
          cases: [
            { name: "deploy", when: "input.reply == 'deploy'" },
            { name: "human", when: "false" },
          ],
          default: "human",
        },
      },
      { id: "gate", type: "approval", if: "nodes.route.output.branch == 'human'", config: { prompt: "ship it?" } },
      { id: "auto", type: "http", if: "nodes.route.output.branch == 'deploy'", config: { url: `${peer.url}/auto` } },
      { id: "note", type: "emit", config: { type: "graph.test.done", payload: { by: { $expr: "nodes.gate.output.approved_by" } } } },
    ],
    [
      ["route", "gate"],
      ["route", "auto"],
      ["gate", "note"],
      ["auto", "note"],
    ],
  );
  const run = await submitGraph("switch", doc, ["--input", '{"reply":"I think we should deploy"}']);
  await waitFor("the gate to park the run", async () => (await view(run)).status === "parked", 20_000);
  const parked = await view(run);
  assert.deepEqual((parked as unknown as { substate: unknown }).substate, { name: "gate", kind: "approval" });
  assert.equal(node(parked, "gate").status, "parked");
  assert.match(ok(await server.cli(["status", run])).stdout, /gate {2}approval {2}parked \(approval\)/);
  ok(await server.cli(["signal", run, "gate", "--payload", '{"decision":"approve","approved_by":"ada"}']));
  const v = await endsAs(run, "succeeded");
  assert.equal(node(v, "route").output?.["branch"], "human");
  assert.equal(node(v, "auto").status, "skipped");
  // A direct signal skips the field check, not the attribution: the approver is its sender, not what the payload claims.
  assert.equal(node(v, "gate").output?.["approved_by"], "admin");
  assert.match(ok(await server.cli(["status", run])).stdout, /gate {2}approved by admin\n/);
  assert.match(String(node(v, "note").output?.["event_id"]), /^evt-/);
  const events = ok(await server.cli(["events", "ls", "-o", "json"])).stdout;
  assert.equal(events.split('"run.awaiting"').length - 1, 1, "one run.awaiting for the one wait");
});

void test("flow cancel: a graph run is cancelled with its running and pending nodes", async () => {
  const doc = graph(
    [
      { id: "wait", type: "http", config: { url: `${peer.url}/hold/cancel` } },
      { id: "then", type: "http", config: { url: `${peer.url}/after-cancel` } },
    ],
    [["wait", "then"]],
  );
  const run = await submitGraph("cancel", doc);
  await waitFor("the held request", () => Promise.resolve(peer.count("/hold/cancel") === 1), 20_000);
  ok(await server.cli(["cancel", run]));
  const v = await endsAs(run, "cancelled");
  assert.deepEqual(
    v.nodes.map((n) => n.status),
    ["cancelled", "cancelled"],
  );
  peer.release();
  assert.equal(peer.count("/after-cancel"), 0);
});

void test("kill -9 mid-graph, restart on the same data: no finished node runs again; the one in flight runs again", async () => {
  const counter = `${dir}/first.count`;
  const doc = graph(
    [
      { id: "first", type: "code", config: { source: `echo ran >> ${counter}\n` } },
      { id: "one", type: "http", config: { url: `${peer.url}/count/one` } },
      { id: "held", type: "http", config: { url: `${peer.url}/hold/kill` } },
      { id: "last", type: "http", config: { url: `${peer.url}/count/last` } },
    ],
    [
      ["first", "held"],
      ["one", "held"],
      ["held", "last"],
    ],
  );
  const run = await submitGraph("kill", doc);
  await waitFor("the held request", () => Promise.resolve(peer.count("/hold/kill") === 1), 30_000);
  await server.kill("SIGKILL");
  peer.release();
  await server.restart();
  // The attempt in flight when the server died runs again (at least once), the finished ones never.
  await waitFor("the held request again", () => Promise.resolve(peer.count("/hold/kill") === 2), 30_000);
  peer.release();
  const v = await endsAs(run, "succeeded");
  assert.equal((await readFile(counter, "utf8")).split("\n").filter(Boolean).length, 1, "the code node ran again");
  assert.equal(peer.count("/count/one"), 1);
  assert.equal(peer.count("/count/last"), 1);
  assert.deepEqual(
    v.nodes.map((n) => [n.node_id, n.status, n.attempt]),
    [
      ["first", "success", 1],
      ["one", "success", 1],
      ["held", "success", 1],
      ["last", "success", 1],
    ],
  );
});

void test("an event node parks until an event its `when` accepts; a declined event leaves it parked", async () => {
  const doc = graph([{ id: "ready", type: "event", config: { event: "deploy.ready", when: "event.payload.n > input.min" } }]);
  const run = await submitGraph("event", doc, ["--input", '{"min":5}']);
  await waitFor("the event node to park", async () => (await view(run)).status === "parked", 20_000);
  ok(await server.cli(["emit", "deploy.ready", "--payload", '{"n":1}']));
  ok(await server.cli(["emit", "deploy.ready", "--payload", '{"n":9}']));
  const v = await endsAs(run, "succeeded");
  assert.deepEqual((node(v, "ready").output as { payload: unknown }).payload, { n: 9 });
});

void test("flow call from a script: a stored graph and a node, each one child run; the replay after a sleep starts none", async () => {
  const stored = graph([{ id: "e", type: "emit", config: { type: "call.stored", payload: { $expr: "input" } } }]);
  ok(await server.cli(["graph", "set", "called", await kit.script("called.json", stored)]));
  const run = await kit.start(
    "caller.sh",
    [
      "#!/bin/sh",
      "set -e",
      "a=$(flow call graph called --input '{\"x\":1}')",
      'echo "A=$a"',
      'b=$(flow call node emit --config \'{"type":"call.node","payload":{"y":2}}\')',
      'echo "B=$b"',
      "flow sleep 1s",
      'flow output set a="$a" b="$b"',
      `if err=$(flow call node http --config '{"url":"${peer.url}/status/500/call"}' 2>&1); then exit 3; fi`,
      'echo "$err"',
      "",
    ].join("\n"),
  );
  const v = await endsAs(run, "succeeded");
  const out = v.output as Record<string, string>;
  assert.match(out["a"]!, /^\{"nodes":\{"e":\{"event_id":"evt-/);
  assert.match(out["b"]!, /^\{"event_id":"evt-/);
  const db = new pg.Pool({ connectionString: server.databaseUrl, max: 1 });
  try {
    const { rows } = await db.query<{ filename: string; n: number }>(
      `select filename, count(*)::int as n from runs where parent_run_id = $1 group by filename order by filename`,
      [run],
    );
    // Three calls (the third's child fails: its peer answers 500), each started once across the replay.
    assert.deepEqual(rows, [
      { filename: "graph:called", n: 1 },
      { filename: "node:emit", n: 1 },
      { filename: "node:http", n: 1 },
    ]);
    const { rows: events } = await db.query<{ type: string; payload: unknown }>(
      `select type, payload from events where type like 'call.%' order by seq`,
    );
    assert.deepEqual(events, [
      { type: "call.stored", payload: { x: 1 } },
      { type: "call.node", payload: { y: 2 } },
    ]);
  } finally {
    await db.end();
  }
  const log = await storedLog(server, run);
  assert.match(log, /flow: call: child run run-\w+ failed: node call failed: .*500/, log);
  assert.equal(peer.count("/status/500/call"), 1);
});
