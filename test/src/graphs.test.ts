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
import { rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { startTestServer, type TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { ended, ok, runIdIn, runKit } from "./support/runs.js";

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
        reply(200, { ok: true, path, echo: { n: 7, word: "seven" } });
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
});
