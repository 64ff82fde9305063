import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError, exitStatusOf, httpStatusOf } from "../errors.js";
import { GRAPH_LIMITS, GRAPH_VERSION, type GraphProblem } from "./model.js";
import type { ManifestInfo } from "./node-configs.js";
import { graphDocumentText, graphError, parseGraph, parseGraphText } from "./parse.js";

const doc = (nodes: unknown[], edges: unknown[] = []): unknown => ({ version: GRAPH_VERSION, nodes, edges });

/** The problems of a refused document as `path: message` lines. */
const problemsOf = (input: unknown, manifestOf?: (type: string) => ManifestInfo | undefined): string[] => {
  const r = parseGraph(input, { manifestOf });
  if (r.ok) assert.fail("expected a refusal");
  return (r as { problems: GraphProblem[] }).problems.map((p) => `${p.path}: ${p.message}`);
};

/** Asserts that one of the problems matches each pattern. */
const hasProblems = (input: unknown, ...want: RegExp[]): string[] => {
  const got = problemsOf(input);
  for (const w of want)
    assert.ok(
      got.some((g) => w.test(g)),
      `no problem matches ${String(w)}; got:\n${got.join("\n")}`,
    );
  return got;
};

const EVERY_TYPE = doc(
  [
    { id: "start", type: "trigger", config: { event_type: "deploy.requested" } },
    { id: "hook", type: "webhook", config: {} },
    {
      id: "fetch",
      type: "http",
      config: {
        url: { $template: "https://api.example.com/items/{{ input.item }}" },
        method: "POST",
        headers: { "X-Trace": { $expr: "input.trace" }, Accept: "application/json" },
        body: { items: [{ $expr: "input.count" }], note: "literal {{ not a template }}" },
        credential: "api",
        timeout: "30s",
      },
      retry: { attempts: 3, backoff: "5s" },
    },
    { id: "build", type: "code", config: { source: "print(1)", interpreter: "python3", credentials: { GH_TOKEN: "gh" } } },
    { id: "script", type: "code", config: { source: "make build", interpreter: "bash -eu" } },
    { id: "sh", type: "shell", config: { command: "echo hi", env: { A: "b" } }, if: 'nodes.build.status == "success"' },
    {
      id: "route",
      type: "switch",
      config: {
        cases: [
          { name: "ship", when: 'nodes.fetch.output.body.verdict == "ship"' },
          { name: "human", when: "true" },
        ],
        default: "human",
      },
    },
    {
      id: "gate",
      type: "approval",
      config: {
        prompt: { $template: "Deploy {{ input.item }}? The model says: {{ nodes.fetch.output.body }}" },
        fields: [
          { name: "env", type: "select", options: ["staging", "prod"], default: "staging", required: true },
          { name: "reason", type: "textarea" },
        ],
        timeout: "1d",
      },
    },
    { id: "wait", type: "event", config: { event: "ci.done", when: "event.payload.sha == input.sha", timeout: "1h" } },
    { id: "child", type: "workflow", config: { graph: "deploy", input: { $expr: "input" } } },
    { id: "remote", type: "workflow", config: { from_repo: { repo: "acme/flows", path: "deploy.json", credential: "gh" } } },
    { id: "done", type: "emit", config: { type: "deploy.finished", payload: { ok: true }, key: { $expr: "input.item" } } },
    { id: "notify", type: "slack.post_message", config: { credential: "slack", channel: "#ops", text: "done" } },
  ],
  [
    { from: "start", to: "fetch" },
    { from: "fetch", to: "build" },
    { from: "build", to: "sh" },
    { from: "fetch", to: "route" },
    { from: "route", to: "gate" },
    { from: "gate", to: "done" },
  ],
);

void test("a document using every node type parses, with retry backoff as milliseconds", () => {
  const r = parseGraph(EVERY_TYPE);
  assert.ok(r.ok, JSON.stringify(!r.ok && r.problems));
  assert.equal(r.graph.nodes.length, 13);
  assert.deepEqual(r.graph.nodes[2]!.retry, { attempts: 3, backoff_ms: 5000 });
  assert.equal(r.graph.nodes[5]!.if, 'nodes.build.status == "success"');
  assert.equal(r.graph.edges.length, 6);
  // config may be left out (a trigger needs none) and edges too.
  const bare = parseGraph({ version: GRAPH_VERSION, nodes: [{ id: "t", type: "trigger" }] });
  assert.ok(bare.ok);
  assert.deepEqual(bare.graph, { version: GRAPH_VERSION, nodes: [{ id: "t", type: "trigger", config: {} }], edges: [] });
  // A retry without backoff waits 1s.
  const r2 = parseGraph(doc([{ id: "t", type: "shell", config: { command: "x" }, retry: { attempts: 2 } }]));
  assert.ok(r2.ok);
  assert.deepEqual(r2.graph.nodes[0]!.retry, { attempts: 2, backoff_ms: 1000 });
});

void test("the shape: version, unknown top-level and node keys, node id rule, retry bounds", () => {
  assert.deepEqual(problemsOf({ version: "flowsvc-graph/v2", nodes: [{ id: "a", type: "trigger" }] }), [
    'version: must be "flowsvc-graph/v1"',
  ]);
  hasProblems({ version: GRAPH_VERSION, nodes: [{ id: "a", type: "trigger" }], edge: [] }, /^\(document\): unknown key "edge"$/);
  hasProblems({ version: GRAPH_VERSION }, /^nodes: required$/);
  hasProblems(doc([]), /^nodes: a graph needs at least one node$/);
  hasProblems(doc([{ id: "a", type: "trigger", conf: {} }]), /^nodes\[0\]: unknown key "conf"$/);
  hasProblems(doc([{ type: "trigger" }]), /^nodes\[0\]\.id: required$/);
  hasProblems(doc([{ id: "9a", type: "trigger" }]), /^nodes\[0\]\.id: must be 1-64 characters/);
  hasProblems(doc([{ id: "a.b", type: "trigger" }]), /^nodes\[0\]\.id: must be/);
  hasProblems(doc([{ id: "x".repeat(65), type: "trigger" }]), /^nodes\[0\]\.id: must be/);
  hasProblems(doc([{ id: "a", type: "trigger", config: [] }]), /^nodes\[0\]\.config: /);
  hasProblems(doc([{ id: "a", type: "trigger", retry: { attempts: 0 } }]), /^nodes\[0\]\.retry\.attempts: /);
  hasProblems(doc([{ id: "a", type: "trigger", retry: { attempts: 21 } }]), /^nodes\[0\]\.retry\.attempts: /);
  hasProblems(doc([{ id: "a", type: "trigger", retry: { attempts: 2, backoff: "-1s" } }]), /^nodes\[0\]\.retry\.backoff: .*negative/);
  hasProblems(doc([{ id: "a", type: "trigger", retry: { attempts: 2, backoff: "2h" } }]), /^nodes\[0\]\.retry\.backoff: at most 1h$/);
  hasProblems(doc([{ id: "a", type: "trigger" }], [{ from: "a" }]), /^edges\[0\]\.to: required$/);
  for (const bad of [null, [], "graph", 42]) assert.ok(problemsOf(bad).length > 0);
});

void test("one malformed node does not hide the other problems: every node, the edges and the top level are reported together", () => {
  const got = problemsOf({
    version: "flowsvc-graph/v0",
    nodes: [
      { id: "a", type: "http", config: { url: "http://x" }, colour: "red" },
      { id: "b", type: "http", config: {} },
      { id: "9c", type: "shell", config: { command: "x" } },
      { id: "b", type: "trigger" },
    ],
    edges: [
      { from: "a", to: "b" },
      { from: "b", to: "zz" },
    ],
  });
  assert.deepEqual(got, [
    'version: must be "flowsvc-graph/v1"',
    'nodes[0]: unknown key "colour"',
    "nodes[2].id: must be 1-64 characters from [A-Za-z0-9_-], starting with a letter or _ (it is read in expressions as nodes.<id>)",
    'nodes[3].id: duplicate id "b" (also nodes[1])',
    'edges[1].to: no node has id "zz"',
    "nodes[1].config.url: required",
  ]);
});

void test("ids, edges and cycles: duplicates, unknown ends, self-edges, and the cycle's ids in order", () => {
  const nodes = ["a", "b", "c", "d"].map((id) => ({ id, type: "trigger" }));
  hasProblems(doc([...nodes, { id: "b", type: "trigger" }]), /^nodes\[4\]\.id: duplicate id "b" \(also nodes\[1\]\)$/);
  hasProblems(
    doc(nodes, [
      { from: "a", to: "b" },
      { from: "b", to: "zz" },
    ]),
    /^edges\[1\]\.to: no node has id "zz"$/,
  );
  hasProblems(doc(nodes, [{ from: "nope", to: "a" }]), /^edges\[0\]\.from: no node has id "nope"$/);
  hasProblems(doc(nodes, [{ from: "c", to: "c" }]), /^edges\[0\]: an edge from "c" to itself$/);
  hasProblems(
    doc(nodes, [
      { from: "a", to: "b" },
      { from: "a", to: "b" },
    ]),
    /^edges\[1\]: duplicate edge from "a" to "b"$/,
  );
  // a -> b -> c -> d -> b: the cycle is b, c, d (a only leads into it).
  const cyc = problemsOf(
    doc(nodes, [
      { from: "a", to: "b" },
      { from: "b", to: "c" },
      { from: "c", to: "d" },
      { from: "d", to: "b" },
    ]),
  );
  assert.deepEqual(cyc, ["edges: the edges make a cycle: b -> c -> d -> b"]);
  // A cycle is still found next to a bad edge.
  hasProblems(
    doc(nodes, [
      { from: "a", to: "x" },
      { from: "c", to: "d" },
      { from: "d", to: "c" },
    ]),
    /^edges: the edges make a cycle: (c -> d -> c|d -> c -> d)$/,
  );
  // A diamond is no cycle.
  assert.ok(
    parseGraph(
      doc(nodes, [
        { from: "a", to: "b" },
        { from: "a", to: "c" },
        { from: "b", to: "d" },
        { from: "c", to: "d" },
      ]),
    ).ok,
  );
});

void test("every expression compiles through core's CEL: if, $expr, $template holes, switch and event when", () => {
  const node = (extra: Record<string, unknown>) => ({ id: "a", type: "shell", config: { command: "x" }, ...extra });
  hasProblems(doc([node({ if: "nodes.b.status ==" })]), /^nodes\[0\]\.if: .* at line 1, column \d+$/);
  hasProblems(doc([node({ if: "secrets.x" })]), /^nodes\[0\]\.if: Unknown variable: secrets at line 1, column 1$/);
  hasProblems(doc([node({ if: "" })]), /^nodes\[0\]\.if: CEL expression is empty$/);
  hasProblems(doc([node({ if: "(".repeat(40) + "1" + ")".repeat(40) })]), /^nodes\[0\]\.if: CEL expression nests brackets deeper than 32/);
  hasProblems(doc([node({ if: 'input.x.matches("(a+)+")' })]), /^nodes\[0\]\.if: .*repeated group/);
  hasProblems(
    doc([{ id: "a", type: "http", config: { url: "http://x", body: { deep: [{ $expr: "input +" }] } } }]),
    /^nodes\[0\]\.config\.body\.deep\[0\]\.\$expr: .* at line 1, column \d+$/,
  );
  // A hole's position is told within the whole template.
  hasProblems(
    doc([{ id: "a", type: "shell", config: { command: { $template: "echo {{ input.x }} {{ input. }}" } } }]),
    /^nodes\[0\]\.config\.command\.\$template: .* at line 1, column 30$/,
  );
  hasProblems(
    doc([{ id: "a", type: "shell", config: { command: { $template: "echo {{ input.x" } } }]),
    /^nodes\[0\]\.config\.command\.\$template: "\{\{" at character 6 has no closing "\}\}"$/,
  );
  hasProblems(
    doc([{ id: "a", type: "shell", config: { command: { $template: "echo {{  }}" } } }]),
    /\$template: the hole at character 6 is empty$/,
  );
  hasProblems(
    doc([{ id: "a", type: "shell", config: { command: { $expr: "input.x", extra: 1 } } }]),
    /^nodes\[0\]\.config\.command: an object with "\$expr" may have no other key$/,
  );
  hasProblems(
    doc([{ id: "a", type: "shell", config: { command: { $expr: 42 } } }]),
    /^nodes\[0\]\.config\.command: "\$expr" must be a string$/,
  );
  hasProblems(
    doc([{ id: "s", type: "switch", config: { cases: [{ name: "x", when: "event.x" }] } }]),
    /^nodes\[0\]\.config\.cases\[0\]\.when: Unknown variable: event/,
  );
  // An event node's when reads the event (and input and nodes).
  assert.ok(
    parseGraph(
      doc([{ id: "e", type: "event", config: { event: "x.y", when: 'event.payload.a == input.a && nodes.e.status == "parked"' } }]),
    ).ok,
  );
  hasProblems(
    doc([{ id: "e", type: "event", config: { event: "x.y", when: "event.payload.a ==" } }]),
    /^nodes\[0\]\.config\.when: .* at line 1, column/,
  );
});

void test("an expression reading a node id that no node has is refused where it is read", () => {
  const nodes = (extra: Record<string, unknown>) => [
    { id: "fetch", type: "http", config: { url: "http://x" } },
    { id: "b", ...extra },
  ];
  hasProblems(
    doc(nodes({ type: "shell", config: { command: "x" }, if: 'nodes.fecth.status == "success"' })),
    /^nodes\[1\]\.if: no node has id "fecth" \(read as nodes\.fecth\)$/,
  );
  hasProblems(
    doc(nodes({ type: "shell", config: { command: { $expr: 'nodes["x-y"].output' } } })),
    /^nodes\[1\]\.config\.command\.\$expr: no node has id "x-y" \(read as nodes\["x-y"\]\)$/,
  );
  hasProblems(
    doc(nodes({ type: "shell", config: { command: { $template: "echo {{ nodes.fetch.output }} {{ nodes.nope.output }}" } } })),
    /^nodes\[1\]\.config\.command\.\$template: no node has id "nope" \(read as nodes\.nope\) in the hole at line 1, column 33$/,
  );
  hasProblems(
    doc(nodes({ type: "switch", config: { cases: [{ name: "a", when: "nodes.nope.output == 1.0" }] } })),
    /^nodes\[1\]\.config\.cases\[0\]\.when: no node has id "nope"/,
  );
  hasProblems(
    doc(nodes({ type: "event", config: { event: "x.y", when: "event.a == nodes.nope.output" } })),
    /^nodes\[1\]\.config\.when: no node has id "nope"/,
  );
  // An id with "-" read with a dot is a subtraction: the refusal says how to write it.
  hasProblems(
    doc([
      { id: "deploy-prod", type: "shell", config: { command: "x" } },
      { id: "b", type: "shell", config: { command: "x" }, if: 'nodes.deploy-prod.status == "success"' },
    ]),
    /^nodes\[1\]\.if: Unknown variable: prod at line 1, column 14; to read node "deploy-prod" write nodes\["deploy-prod"\]$/,
  );
  hasProblems(
    doc([
      { id: "a-b", type: "shell", config: { command: "x" } },
      { id: "b", type: "shell", config: { command: { $expr: "nodes.a.output" } } },
    ]),
    /^nodes\[1\]\.config\.command\.\$expr: no node has id "a" \(read as nodes\.a\); to read node "a-b" write nodes\["a-b"\]$/,
  );
  // Inside a string literal it is text, not a read.
  assert.ok(
    parseGraph(doc(nodes({ type: "shell", config: { command: { $expr: '"nodes.nope"' } }, if: "nodes.fetch.status == 'nodes.zz'" }))).ok,
  );
});

const one = (type: string, config: unknown) => doc([{ id: "n", type, config }]);

void test("a code or shell node's env refuses what core's env rule refuses, at the variable's path", () => {
  const hostile = ["FLOW_TOKEN", "LD_PRELOAD", "LD_AUDIT", "BASH_ENV", "PATH", "A=B", "", "X".repeat(10_000)];
  const env: Record<string, string> = { OK: "1", ...Object.fromEntries(hostile.map((n): [string, string] => [n, "x"])) };
  const got = problemsOf(doc([{ id: "s", type: "shell", config: { command: "true", env } }]));
  assert.equal(got.filter((g) => g.startsWith("nodes[0].config.env")).length, hostile.length, got.join("\n"));
  hasProblems(
    doc([{ id: "c", type: "code", config: { source: "x", env } }]),
    /^nodes\[0\]\.config\.env\.FLOW_TOKEN: env variable "FLOW_TOKEN" is refused: FLOW_\* variables are reserved/,
    /^nodes\[0\]\.config\.env\.LD_PRELOAD: env variable "LD_PRELOAD" is refused/,
    /^nodes\[0\]\.config\.env\.LD_AUDIT: env variable "LD_AUDIT" is refused/,
    /^nodes\[0\]\.config\.env\.BASH_ENV: env variable "BASH_ENV" is refused/,
    /^nodes\[0\]\.config\.env\.PATH: env variable "PATH" is refused/,
    /^nodes\[0\]\.config\.env\["A=B"\]: env variable "A=B" is not an environment variable name/,
    /^nodes\[0\]\.config\.env\[""\]: an env variable is empty$/,
    /^nodes\[0\]\.config\.env\["X{64}\.\.\."\]: an env variable is at most 100 characters; this one has 10000$/,
  );
  // A NUL or a lone surrogate is refused by the document's storability guard first, at the same path.
  hasProblems(
    one("shell", { command: "true", env: { "A\u0000B": "x" } }),
    /^nodes\[0\]\.config\.env\["A\\u0000B"\]: has a key that holds a NUL/,
  );
  hasProblems(
    one("shell", { command: "true", env: { "A\ud800": "x" } }),
    /^nodes\[0\]\.config\.env\["A\\ud800"\]: has a key that holds a lone/,
  );
});

void test("per-type config rules, each problem at its path", () => {
  const one = (type: string, config: unknown) => doc([{ id: "n", type, config }]);
  // http
  hasProblems(one("http", {}), /^nodes\[0\]\.config\.url: required$/);
  hasProblems(one("http", { url: 42 }), /^nodes\[0\]\.config\.url: must be a string or \{"\$expr"/);
  hasProblems(one("http", { url: "ftp://x" }), /^nodes\[0\]\.config\.url: must be an http:\/\/ or https:\/\/ URL$/);
  hasProblems(one("http", { url: "http://x", urll: "y" }), /^nodes\[0\]\.config: unknown key "urll"$/);
  hasProblems(one("http", { url: "http://x", method: "FETCH" }), /^nodes\[0\]\.config\.method: must be one of GET/);
  hasProblems(
    one("http", { url: "http://x", headers: { "Bad Header": "v" } }),
    /^nodes\[0\]\.config\.headers\["Bad Header"\]: the key is not an HTTP header name$/,
  );
  hasProblems(
    one("http", { url: "http://x", headers: { X: "a\r\nInjected: 1" } }),
    /^nodes\[0\]\.config\.headers\.X: a header value cannot hold a line break/,
  );
  hasProblems(one("http", { url: "http://x", headers: { X: 1 } }), /^nodes\[0\]\.config\.headers\.X: must be a string/);
  hasProblems(
    one("http", { url: "http://x", credential: "../etc" }),
    /^nodes\[0\]\.config\.credential: credential name "..\/etc" is not allowed/,
  );
  hasProblems(one("http", { url: "http://x", timeout: "soon" }), /^nodes\[0\]\.config\.timeout: invalid duration "soon"/);
  // The engine's limits are the check's: refused before anything is saved or run, not when the node runs.
  hasProblems(one("http", { url: "http://x", timeout: "11m" }), /^nodes\[0\]\.config\.timeout: at most 10m \(600s\)$/);
  assert.ok(parseGraph(one("http", { url: "http://x", timeout: "10m" })).ok);
  hasProblems(one("shell", { command: "x", timeout: "25h" }), /^nodes\[0\]\.config\.timeout: at most 1d \(86400s\)$/);
  hasProblems(one("code", { source: "x", timeout: "1e400s" }), /^nodes\[0\]\.config\.timeout: /);
  assert.ok(parseGraph(one("code", { source: "x", timeout: "1d" })).ok);
  assert.ok(parseGraph(one("http", { url: { $expr: "input.url" }, method: { $expr: "input.m" }, credential: { $expr: "input.cred" } })).ok);
  // code and shell
  hasProblems(one("code", {}), /^nodes\[0\]\.config\.source: required$/);
  // `file` is refused by the graph check, at its path, not when the node runs (a graph has no files beside it)
  hasProblems(one("code", { file: "scripts/build.sh" }), /^nodes\[0\]\.config\.file: a code node runs its source/);
  hasProblems(one("code", { source: "x", file: "y" }), /^nodes\[0\]\.config\.file: a code node runs its source/);
  hasProblems(
    one("code", { source: "x", credentials: { LD_PRELOAD: "gh" } }),
    /^nodes\[0\]\.config\.credentials\.LD_PRELOAD: credential variable "LD_PRELOAD" is refused/,
  );
  hasProblems(one("code", { source: "x", credentials: { FLOW_TOKEN: "gh" } }), /^nodes\[0\]\.config\.credentials\.FLOW_TOKEN: /);
  hasProblems(
    one("code", { source: "x", credentials: { TOKEN: "a b" } }),
    /^nodes\[0\]\.config\.credentials\.TOKEN: credential name "a b" is not allowed/,
  );
  hasProblems(one("code", { source: "x", credentials: { TOKEN: 7 } }), /^nodes\[0\]\.config\.credentials\.TOKEN: /);
  hasProblems(
    one("code", { source: "x", credentials: { "A:B": "gh" } }),
    /^nodes\[0\]\.config\.credentials\["A:B"\]: credential variable "A:B" /,
  );
  const tooMany = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`V${i}`, "gh"]));
  hasProblems(
    one("code", { source: "x", credentials: tooMany }),
    /^nodes\[0\]\.config\.credentials: at most 64 credential variables; 65 were given$/,
  );
  hasProblems(one("shell", {}), /^nodes\[0\]\.config\.command: required$/);
  // switch
  hasProblems(one("switch", {}), /^nodes\[0\]\.config\.cases: required$/);
  hasProblems(one("switch", { cases: [] }), /^nodes\[0\]\.config\.cases: a switch needs at least one case$/);
  hasProblems(one("switch", { cases: [{ name: "a" }] }), /^nodes\[0\]\.config\.cases\[0\]\.when: required$/);
  hasProblems(
    one("switch", {
      cases: [
        { name: "a", when: "true" },
        { name: "a", when: "false" },
      ],
    }),
    /^nodes\[0\]\.config\.cases\[1\]\.name: duplicate case name "a"$/,
  );
  hasProblems(
    one("switch", { cases: [{ name: "a", when: "true" }], default: "b" }),
    /^nodes\[0\]\.config\.default: "b" names no case \(cases: a\)$/,
  );
  // approval
  hasProblems(one("approval", {}), /^nodes\[0\]\.config\.prompt: required$/);
  // approval fields: approval-fields.ts's parseApprovalFields is the one rule (the route and `flow approve` use it too)
  hasProblems(
    one("approval", { prompt: "ok?", fields: [{ name: "env", type: "select" }] }),
    /^nodes\[0\]\.config\.fields\[0\]\.options: a select needs a non-empty array of strings$/,
  );
  hasProblems(
    one("approval", { prompt: "ok?", fields: [{ name: "env", type: "select", options: ["a", "b"], default: "c" }] }),
    /^nodes\[0\]\.config\.fields\[0\]\.default: "c" is not one of the options$/,
  );
  hasProblems(
    one("approval", { prompt: "ok?", fields: [{ name: "t", type: "text", options: ["a"] }] }),
    /^nodes\[0\]\.config\.fields\[0\]\.options: only a select has options, this field is a text$/,
  );
  hasProblems(
    one("approval", { prompt: "ok?", fields: [{ name: "t", type: "radio" }] }),
    /^nodes\[0\]\.config\.fields\[0\]\.type: must be one of text, textarea, select$/,
  );
  hasProblems(
    one("approval", { prompt: "ok?", fields: [{ name: "decision", type: "text" }] }),
    /^nodes\[0\]\.config\.fields\[0\]\.name: "decision" is reserved/,
  );
  hasProblems(
    one("approval", {
      prompt: "ok?",
      fields: [
        { name: "a", type: "text" },
        { name: "a", type: "text" },
      ],
    }),
    /^nodes\[0\]\.config\.fields\[1\]\.name: "a" is declared twice$/,
  );
  hasProblems(one("approval", { prompt: "ok?", fields: [{ name: "a", type: "text", required: "yes" }] }), /fields\[0\]\.required: /);
  // What the route would refuse, the graph check refuses too: the answer's own keys, NUL, lone surrogates, too many fields.
  hasProblems(
    one("approval", { prompt: "ok?", fields: [{ name: "timed_out", type: "text" }] }),
    /^nodes\[0\]\.config\.fields\[0\]\.name: "timed_out" is reserved/,
  );
  hasProblems(
    one("approval", { prompt: "ok?", fields: [{ name: "env", type: "select", options: ["a", "b\u0000c"] }] }),
    /^nodes\[0\]\.config\.fields\[0\]\.options\[1\]: /,
  );
  hasProblems(
    one("approval", { prompt: "ok?", fields: [{ name: "n", type: "text", default: "x\ud800" }] }),
    /^nodes\[0\]\.config\.fields\[0\]\.default: /,
  );
  hasProblems(
    one("approval", { prompt: "ok?", fields: Array.from({ length: 51 }, (_, i) => ({ name: `f${i}`, type: "text" })) }),
    /^nodes\[0\]\.config\.fields: at most 50 fields; 51 were given$/,
  );
  hasProblems(one("approval", { prompt: "ok?", fields: "env" }), /^nodes\[0\]\.config\.fields: must be an array of fields$/);
  // event
  hasProblems(one("event", {}), /^nodes\[0\]\.config\.event: required$/);
  hasProblems(one("event", { event: "ci done" }), /^nodes\[0\]\.config\.event: event type "ci done" must be 1-64 characters/);
  hasProblems(one("event", { event: "ci.done", timeout: "forever" }), /^nodes\[0\]\.config\.timeout: invalid duration/);
  // workflow
  hasProblems(one("workflow", {}), /^nodes\[0\]\.config: give exactly one of graph .* none was given$/);
  assert.ok(parseGraph(one("workflow", { script: "print(1)", filename: "build.py", interpreter: "python3 -u" })).ok);
  hasProblems(one("workflow", { script: "x", filename: "a/b.py" }), /^nodes\[0\]\.config\.filename: must be a file name/);
  hasProblems(one("workflow", { script: "x", filename: "a\u0000.py" }), /^nodes\[0\]\.config\.filename: holds a NUL/);
  hasProblems(one("workflow", { graph: "g", filename: "x.py" }), /^nodes\[0\]\.config\.filename: only a script takes a filename/);
  hasProblems(one("workflow", { graph: "a", script: "b" }), /^nodes\[0\]\.config\.script: give exactly one of .* got graph, script$/);
  hasProblems(
    one("workflow", { from_repo: { repo: "acme/flows", path: "x.json" } }),
    /^nodes\[0\]\.config\.from_repo\.credential: required$/,
  );
  hasProblems(one("workflow", { from_repo: { path: "x.json", credential: "gh" } }), /^nodes\[0\]\.config\.from_repo\.repo: required$/);
  hasProblems(one("workflow", { from_repo: { repo: "acme", path: "x.json", credential: "gh" } }), /from_repo\.repo: must be owner\/name$/);
  // A dot segment would climb out of /repos/ in the contents API's URL (the URL parser resolves it).
  for (const repo of ["../..", "acme/..", "../flows", "./flows", "acme/."])
    hasProblems(one("workflow", { from_repo: { repo, path: "x.json", credential: "gh" } }), /from_repo\.repo: must be owner\/name$/);
  assert.ok(parseGraph(one("workflow", { from_repo: { repo: "acme/flows.js", path: "x.json", credential: "gh" } })).ok);
  hasProblems(
    one("workflow", { from_repo: { repo: "acme/flows", path: "../../etc/passwd", credential: "gh" } }),
    /from_repo\.path: must be a path inside/,
  );
  // emit, trigger, webhook
  hasProblems(one("emit", {}), /^nodes\[0\]\.config\.type: required$/);
  hasProblems(one("emit", { type: "run.failed" }), /^nodes\[0\]\.config\.type: event type "run.failed" is reserved/);
  hasProblems(one("emit", { type: "Flow.x" }), /^nodes\[0\]\.config\.type: .*reserved/);
  hasProblems(one("trigger", { event_type: "a b" }), /^nodes\[0\]\.config\.event_type: event type "a b" must be/);
  hasProblems(one("webhook", { secret: "x" }), /^nodes\[0\]\.config: unknown key "secret"$/);
  // unknown types
  hasProblems(one("frobnicate", {}), /^nodes\[0\]\.type: unknown node type "frobnicate"; use one of http, /);
  hasProblems(one("Slack.Post", {}), /^nodes\[0\]\.type: unknown node type/);
});

void test("connector types: checked against the manifests when given, accepted unchecked without them", () => {
  const manifests: Record<string, ManifestInfo> = {
    "slack.post_message": { type: "slack.post_message", credential: { kinds: ["bearer"], required: true } },
    "anthropic.messages": { type: "anthropic.messages", credential: { kinds: ["api_key"], required: true } },
    "demo.echo": { type: "demo.echo", credential: { kinds: ["bearer"], required: false } },
  };
  const manifestOf = (t: string) => manifests[t];
  const one = (type: string, config: unknown) => doc([{ id: "n", type, config }]);
  assert.ok(parseGraph(one("acme.thing", {})).ok, "without manifests a dotted type passes");
  assert.deepEqual(problemsOf(one("acme.thing", {}), manifestOf), ['nodes[0].type: no connector has type "acme.thing"']);
  assert.deepEqual(problemsOf(one("slack.post_message", { channel: "#x" }), manifestOf), [
    "nodes[0].config.credential: required: slack.post_message needs a credential of kind bearer",
  ]);
  assert.match(
    problemsOf(one("slack.post_message", { credential: "a/b" }), manifestOf)[0]!,
    /^nodes\[0\]\.config\.credential: credential name "a\/b"/,
  );
  assert.ok(parseGraph(one("slack.post_message", { credential: "slack" }), { manifestOf }).ok);
  assert.ok(parseGraph(one("slack.post_message", { credential: { $expr: "input.c" } }), { manifestOf }).ok);
  assert.ok(parseGraph(one("demo.echo", {}), { manifestOf }).ok);
  // With the connector's own config check, its problems replace the credential check, at their paths.
  const connectorProblems = (type: string, config: Record<string, unknown>): string[] =>
    type === "slack.post_message" && config["with"] === undefined
      ? ["config.with.channel: required", "config.credential: required (bearer)"]
      : [];
  const r = parseGraph(one("slack.post_message", { credential: "bad name" }), { manifestOf, connectorProblems });
  assert.deepEqual(!r.ok && r.problems, [
    { path: "nodes[0].config.with.channel", message: "required" },
    { path: "nodes[0].config.credential", message: "required (bearer)" },
    {
      path: "nodes[0].config.credential",
      message: 'credential name "bad name" is not allowed: use ASCII letters, digits, ".", "_" and "-", starting with a letter or digit',
    },
  ]);
  assert.ok(parseGraph(one("slack.post_message", { with: {} }), { manifestOf, connectorProblems }).ok);
  assert.deepEqual(problemsOf(one("nope.nope", {}), manifestOf), ['nodes[0].type: no connector has type "nope.nope"']);
});

void test("hostile input: NUL, lone surrogates, deep nesting, 1e400, huge counts: refused with a path, never thrown", () => {
  hasProblems(doc([{ id: "a\u0000b", type: "trigger" }]), /^nodes\[0\]\.id: holds a NUL character/);
  hasProblems(doc([{ id: "a\ud800", type: "trigger" }]), /^nodes\[0\]\.id: holds a lone UTF-16 surrogate/);
  hasProblems(
    doc([{ id: "a", type: "http", config: { url: "http://x", headers: { "X-\udc00": "v" } } }]),
    /^nodes\[0\]\.config\.headers\["X-\\udc00"\]: has a key that holds a lone/,
  );
  hasProblems(
    doc([{ id: "a", type: "http", config: { url: "http://x", body: { n: Infinity } } }]),
    /^nodes\[0\]\.config\.body\.n: is a number outside the range/,
  );
  const text = `{"version":"${GRAPH_VERSION}","nodes":[{"id":"a","type":"http","config":{"url":"http://x","body":{"n":1e400}}}]}`;
  assert.match(problemsOfText(text)[0]!, /^nodes\[0\]\.config\.body\.n: is a number outside/);
  // 10,000 levels deep: a problem at the depth limit, not a stack overflow.
  let deep: unknown = "leaf";
  for (let i = 0; i < 10_000; i++) deep = { a: deep };
  const got = problemsOf(doc([{ id: "a", type: "http", config: { url: "http://x", body: deep } }]));
  assert.equal(got.length, 1);
  assert.match(got[0]!, /^nodes\[0\]\.config\.body(\.a)+: is nested too deep: a node's config nests at most 32 levels$/);
  const deepText = `{"version":"${GRAPH_VERSION}","nodes":[{"id":"a","type":"http","config":{"url":"http://x","body":${"[".repeat(10_000)}${"]".repeat(10_000)}}}]}`;
  assert.match(problemsOfText(deepText)[0]!, /is nested too deep/);
  // Exactly at the limit is fine: the config is level 1.
  let atLimit: unknown = 1;
  for (let i = 0; i < GRAPH_LIMITS.configDepth - 1; i++) atLimit = [atLimit];
  assert.ok(parseGraph(doc([{ id: "a", type: "http", config: { url: "http://x", body: atLimit } }])).ok);
  atLimit = [atLimit];
  assert.ok(!parseGraph(doc([{ id: "a", type: "http", config: { url: "http://x", body: atLimit } }])).ok);
  // Counts: told before anything walks the nodes.
  const many = Array.from({ length: 100_000 }, (_, i) => ({ id: `n${i}`, type: "trigger" }));
  assert.deepEqual(problemsOf(doc(many)), ["nodes: a graph has at most 500 nodes; this one has 100000"]);
  const max = Array.from({ length: GRAPH_LIMITS.nodes }, (_, i) => ({ id: `n${i}`, type: "trigger" }));
  const chain = max.slice(1).map((n, i) => ({ from: `n${i}`, to: n.id }));
  const started = performance.now();
  assert.ok(parseGraph(doc(max, chain)).ok);
  assert.ok(performance.now() - started < 2000, "500 nodes check in well under 2 s");
  const edges = Array.from({ length: GRAPH_LIMITS.edges + 1 }, () => ({ from: "n0", to: "n1" }));
  assert.deepEqual(problemsOf(doc(max, edges)), ["edges: a graph has at most 2000 edges; this one has 2001"]);
  // Many bad nodes: the list is capped, with a count of the rest.
  const bad = Array.from({ length: 300 }, (_, i) => ({ id: `n${i}`, type: "http", config: {} }));
  const capped = problemsOf(doc(bad));
  assert.equal(capped.length, GRAPH_LIMITS.problems + 1);
  assert.equal(capped.at(-1), "(document): 200 more problems not shown");
  // Expressions: at most 5000 in a document, 256 holes in a template; counted before any is compiled.
  const exprs = Object.fromEntries(Array.from({ length: GRAPH_LIMITS.expressions + 1 }, (_, i) => [`k${i}`, { $expr: "input.x" }]));
  assert.deepEqual(problemsOf(doc([{ id: "a", type: "http", config: { url: "http://x", body: exprs } }])), [
    "nodes: a graph holds at most 5000 expressions; this one has 5001",
  ]);
  const holes = "{{ input.x }}".repeat(GRAPH_LIMITS.templateHoles + 1);
  assert.deepEqual(problemsOf(doc([{ id: "a", type: "shell", config: { command: { $template: holes } } }])), [
    "nodes[0].config.command.$template: a template has at most 256 {{ }} holes",
  ]);
  assert.ok(parseGraph(doc([{ id: "a", type: "shell", config: { command: { $template: "{{ input.x }}".repeat(256) } } }])).ok);
  // A wide list is walked without recursion or spread (a call takes about 120k arguments at most).
  assert.ok(parseGraph(doc([{ id: "a", type: "http", config: { url: "http://x", body: new Array(200_000).fill([1]) } }])).ok);
  // A __proto__ key is refused at its place (as the API's body parser refuses it) and never reaches the prototype,
  // in a body as in a config, where copying the config had dropped it past the unknown-key check.
  for (const config of ['{"url":"http://x","body":{"__proto__":{"polluted":1}}}', '{"url":"http://x","__proto__":{"polluted":1}}']) {
    const r = parseGraphText(`{"version":"${GRAPH_VERSION}","nodes":[{"id":"a","type":"http","config":${config}}]}`);
    assert.equal(r.ok, false, config);
    assert.match(
      (r as { problems: GraphProblem[] }).problems.map((p) => `${p.path}: ${p.message}`).join("\n"),
      /__proto__.*has a key that is "__proto__"/,
    );
  }
  assert.equal(({} as Record<string, unknown>)["polluted"], undefined);
});

const problemsOfText = (text: string): string[] => {
  const r = parseGraphText(text);
  assert.equal(r.ok, false);
  return (r as { problems: GraphProblem[] }).problems.map((p) => `${p.path}: ${p.message}`);
};

void test("parseGraphText: bad JSON is told with line and column; over 1 MiB is refused unread", () => {
  const text = '{\n  "version": "flowsvc-graph/v1",\n  "nodes": [,]\n}';
  assert.deepEqual(problemsOfText(text), ["(document): not valid JSON at line 3, column 13: Unexpected token ','"]);
  assert.deepEqual(problemsOfText('{"version": "flowsvc-graph/v1" "nodes": []}'), [
    "(document): not valid JSON at line 1, column 32: Expected ',' or '}' after property value",
  ]);
  assert.deepEqual(problemsOfText(""), ["(document): not valid JSON at line 1, column 1: the text ends too early"]);
  assert.deepEqual(problemsOfText('{"a":\n  1} trailing'), [
    "(document): not valid JSON at line 2, column 6: Unexpected non-whitespace character after JSON",
  ]);
  assert.deepEqual(problemsOfText('{"x": "at position 3", "y": [,]}'), [
    "(document): not valid JSON at line 1, column 30: Unexpected token ','",
  ]);
  // The excerpt V8 quotes is not repeated (it may be long, or hold a secret).
  assert.deepEqual(problemsOfText(`{"nodes": [${"1,".repeat(1000)}SECRET]}`), [
    "(document): not valid JSON at line 1, column 2012: Unexpected token 'S'",
  ]);
  const big = `{"version":"${GRAPH_VERSION}","nodes":[{"id":"a","type":"shell","config":{"command":"${"x".repeat(GRAPH_LIMITS.textBytes)}"}}]}`;
  assert.deepEqual(problemsOfText(big), [`(document): the document is ${Buffer.byteLength(big)} bytes; the limit is 1048576 (1 MiB)`]);
  assert.ok(parseGraphText(JSON.stringify(EVERY_TYPE)).ok);
});

void test("graphError: invalid_argument (HTTP 400, exit 2), every problem in the message and the details", () => {
  const r = parseGraph(
    doc([
      { id: "a", type: "http", config: {} },
      { id: "b", type: "shell", config: {} },
    ]),
  );
  assert.ok(!r.ok);
  const e = graphError(r.problems);
  assert.ok(e instanceof FlowError);
  assert.equal(httpStatusOf(e.code), 400);
  assert.equal(exitStatusOf(e.code), 2);
  assert.equal(e.message, "nodes[0].config.url: required; nodes[1].config.command: required");
  assert.deepEqual(e.details, { problems: r.problems });
});

test("graphDocumentText: a checked graph as text parseGraph takes again, retries included (backoff written back in ms)", () => {
  const doc = {
    version: "flowsvc-graph/v1",
    nodes: [
      { id: "a", type: "code", config: { source: "echo" }, retry: { attempts: 3, backoff: "1500ms" } },
      { id: "b", type: "code", config: { source: "echo" }, retry: { attempts: 2, backoff: "0s" }, if: "true" },
      { id: "c", type: "code", config: { source: "echo" } },
    ],
    edges: [{ from: "a", to: "b" }],
  };
  const first = parseGraph(doc);
  assert.ok(first.ok, JSON.stringify(first));
  const again = parseGraph(JSON.parse(graphDocumentText(first.graph)));
  assert.ok(again.ok, JSON.stringify(again));
  assert.deepEqual(again.graph, first.graph);
  assert.deepEqual(
    again.graph.nodes.map((n) => n.retry),
    [{ attempts: 3, backoff_ms: 1500 }, { attempts: 2, backoff_ms: 0 }, undefined],
  );
  // What JSON.stringify of a checked graph gave before: refused when read back.
  const plain = parseGraph(JSON.parse(JSON.stringify(first.graph)));
  assert.ok(!plain.ok);
});

void test("an if, a switch case's when and an event node's when the checker types as other than bool are refused where they are; a field read is left to its value", () => {
  const shell = (extra: Record<string, unknown>) => ({ id: "a", type: "shell", config: { command: "x" }, ...extra });
  hasProblems(doc([shell({ if: "1 + 2" })]), /^nodes\[0\]\.if: .*the expression is a int, not a bool/);
  hasProblems(doc([shell({ if: '"yes"' })]), /^nodes\[0\]\.if: .*is a string, not a bool/);
  hasProblems(
    doc([{ id: "s", type: "switch", config: { cases: [{ name: "a", when: "[input.x]" }] } }]),
    /^nodes\[0\]\.config\.cases\[0\]\.when: .*is a list/,
  );
  hasProblems(
    doc([{ id: "e", type: "event", config: { event: "x.y", when: "string(event.type)" } }]),
    /^nodes\[0\]\.config\.when: .*not a bool/,
  );
  for (const ok of ["input.go", "input.n > 1", "nodes.a.output.ok == true", "true"]) {
    const r = parseGraph(doc([shell({}), { id: "b", type: "shell", config: { command: "y" }, if: ok }], [{ from: "a", to: "b" }]));
    assert.ok(r.ok, `${ok}: ${JSON.stringify(r)}`);
  }
  assert.ok(parseGraph(doc([{ id: "e", type: "event", config: { event: "x.y", when: "event.payload.ok" } }])).ok);
});
