/**
 * `flow check <file>` in process: a valid graph prints its counts; every problem is one
 * `error: <path>: <message>` line on stderr and the exit status is 2; YAML and other files are
 * refused with what to do. No server runs (the URL points nowhere): the check is local.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { captureStdio } from "../testing/capture-stdio.js";
import { runCli } from "./program.js";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "flow-check-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const flow = async (args: string[], stdin = ""): Promise<{ code: number; stdout: string; stderr: string }> => {
  const { io, out, err } = captureStdio(stdin);
  const code = await runCli(["node", "flow", ...args], { env: { FLOWSVC_URL: "http://127.0.0.1:9" }, io, now: () => new Date(0) });
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
};

const file = async (name: string, text: string): Promise<string> => {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
};

const GOOD = {
  version: "flowsvc-graph/v1",
  nodes: [
    { id: "fetch", type: "http", config: { url: { $template: "https://api.example.com/{{ input.item }}" }, credential: "api" } },
    {
      id: "route",
      type: "switch",
      config: { cases: [{ name: "ship", when: 'nodes.fetch.output.body.verdict == "ship"' }], default: "ship" },
    },
    {
      id: "gate",
      type: "approval",
      config: { prompt: "Deploy?", fields: [{ name: "env", type: "select", options: ["staging", "prod"] }] },
    },
  ],
  edges: [
    { from: "fetch", to: "route" },
    { from: "route", to: "gate" },
  ],
};

void test("a valid graph: `ok: <n> nodes, <m> edges`, exit 0, also from stdin", async () => {
  const r = await flow(["check", await file("good.json", JSON.stringify(GOOD, null, 2))]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "ok: 3 nodes, 2 edges");
  assert.equal(r.stderr, "");
  const s = await flow(["check", "-"], JSON.stringify(GOOD));
  assert.equal(s.code, 0, s.stderr);
  assert.equal(s.stdout, "ok: 3 nodes, 2 edges");
});

void test("every problem is one `error: <path>: <message>` line on stderr; exit 2", async () => {
  const bad = {
    version: "flowsvc-graph/v1",
    nodes: [
      { id: "fetch", type: "http", config: {} },
      { id: "gate", type: "approval", config: { prompt: "ok?", fields: [{ name: "env", type: "select" }] }, if: "nodes.fetch.status ==" },
      { id: "fetch", type: "teleport" },
    ],
    edges: [{ from: "fetch", to: "nowhere" }],
  };
  const r = await flow(["check", await file("bad.json", JSON.stringify(bad))]);
  assert.equal(r.code, 2);
  assert.equal(r.stdout, "");
  assert.deepEqual(r.stderr.split("\n"), [
    'error: nodes[2].id: duplicate id "fetch" (also nodes[0])',
    'error: edges[0].to: no node has id "nowhere"',
    "error: nodes[0].config.url: required",
    "error: nodes[1].if: Unexpected token: EOF at line 1, column 22",
    "error: nodes[1].config.fields[0].options: a select needs a non-empty array of strings",
    'error: nodes[2].type: unknown node type "teleport"; use one of http, code, shell, workflow, event, approval, switch, trigger, emit, webhook or a connector type (<service>.<action>)',
  ]);
  const json = await flow(["check", await file("broken.json", '{\n  "version": "flowsvc-graph/v1",\n  "nodes": [\n}')]);
  assert.equal(json.code, 2);
  assert.equal(json.stderr, "error: (document): not valid JSON at line 4, column 1: Unexpected token '}'");
});

void test("hostile documents are refused with a path: NUL, lone surrogate, 1e400, 10k-deep nesting, over 1 MiB", async () => {
  const cases: Array<[string, RegExp]> = [
    ['{"version":"flowsvc-graph/v1","nodes":[{"id":"a\\u0000b","type":"trigger"}]}', /^error: nodes\[0\]\.id: holds a NUL character/],
    [
      '{"version":"flowsvc-graph/v1","nodes":[{"id":"a\\ud800","type":"trigger"}]}',
      /^error: nodes\[0\]\.id: holds a lone UTF-16 surrogate/,
    ],
    [
      '{"version":"flowsvc-graph/v1","nodes":[{"id":"a","type":"http","config":{"url":"http://x","body":1e400}}]}',
      /^error: nodes\[0\]\.config\.body: is a number outside the range/,
    ],
    [
      `{"version":"flowsvc-graph/v1","nodes":[{"id":"a","type":"http","config":{"url":"http://x","body":${"[".repeat(10_000)}${"]".repeat(10_000)}}}]}`,
      /^error: nodes\[0\]\.config\.body(\[0\])+: is nested too deep/,
    ],
  ];
  for (const [text, want] of cases) {
    const r = await flow(["check", await file("hostile.json", text)]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, want);
  }
  const big = await flow(["check", await file("big.json", " ".repeat(1024 * 1024 + 1))]);
  assert.equal(big.code, 2);
  assert.match(big.stderr, /^error: .*big\.json is 1048577 bytes; a graph document is at most 1048576 \(1 MiB\)/);
});

void test("a pipeline (.yaml/.yml) is compiled: ok with its counts, or one `error: line L, column C: <path>: <message>` per problem", async () => {
  const ok = await flow([
    "check",
    await file("ci.yaml", "jobs:\n  build: {steps: [{run: make}, {run: make test}]}\n  deploy: {needs: build, steps: [{run: ./deploy}]}\n"),
  ]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /^ok: pipeline, 2 jobs, 2 nodes, 1 edges$/m);
  const bad = await flow([
    "check",
    await file("p.YML", "credentials: {TOKEN: '${{ input.t }}'}\njobs:\n  a:\n    needs: [zz]\n    steps: [{run: x}]\n    colour: red\n"),
  ]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^error: line 1, column 22: credentials\.TOKEN: a credentials: value is a credential NAME/m);
  assert.match(bad.stderr, /^error: line 6, column 5: jobs\.a\.colour: unknown key "colour"/m);
  const cycle = await flow([
    "check",
    await file(
      "c.yaml",
      "jobs:\n  a: {needs: b, steps: [{run: x}]}\n  b: {needs: [c], steps: [{run: x}]}\n  c: {needs: [zz, a], steps: [{run: x}]}\n",
    ),
  ]);
  assert.equal(cycle.code, 2);
  assert.match(cycle.stderr, /^error: line 4, column 15: jobs\.c\.needs\[0\]: no job is named "zz"/m);
  assert.match(cycle.stderr, /^error: line 2, column 14: jobs\.a\.needs: needs make a cycle: a -> /m);
  const nul = await flow(["check", await file("n.yaml", 'jobs:\n  a: {steps: [{run: "x\\0"}]}\n')]);
  assert.equal(nul.code, 2);
  assert.match(nul.stderr, /^error: line 2, column 21: jobs\.a\.steps\[0\]\.run: holds a NUL/m);
  // A pipeline's refusals before it is read name a pipeline, not a graph document.
  const big = await flow(["check", await file("big.yaml", " ".repeat(1024 * 1024 + 1))]);
  assert.equal(big.code, 2);
  assert.match(big.stderr, /^error: .*big\.yaml is 1048577 bytes; a pipeline is at most 1048576 \(1 MiB\)/);
  const missing = await flow(["check", "no-such.yaml"]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /cannot read no-such\.yaml: no such file\ngive the path of a pipeline \(\.yaml\)/);
});

void test("other files, directories and missing files are usage errors", async () => {
  const script = await flow(["check", await file("deploy.sh", "echo hi\n")]);
  assert.equal(script.code, 2);
  assert.match(script.stderr, /deploy\.sh: flow check validates graph documents \(\.json files\) and pipelines/);
  const missing = await flow(["check", join(dir, "nope.json")]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /cannot read .*nope\.json: no such file/);
  await mkdir(join(dir, "d.json"));
  const directory = await flow(["check", join(dir, "d.json")]);
  assert.equal(directory.code, 2);
  assert.match(directory.stderr, /cannot read .*d\.json: it is a directory/);
});
