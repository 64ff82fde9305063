import { test } from "node:test";
import assert from "node:assert/strict";
import { exitStatusOf } from "../errors.js";
import { evaluateConfig, evaluateIf } from "../graph/expressions.js";
import { assertPipeline, compilePipeline, formatPipelineProblem, pipelineError } from "./compile.js";
import { PIPELINE_LIMITS } from "./model.js";

/** The problems of a refused pipeline as `line L, column C: path: message` lines. */
const refused = (text: string): string[] => {
  const r = compilePipeline(text);
  if (r.ok) assert.fail(`expected a refusal of:\n${text}`);
  return (r as { problems: Parameters<typeof formatPipelineProblem>[0][] }).problems.map(formatPipelineProblem);
};
const refusedWith = (text: string, want: RegExp): void => {
  const got = refused(text);
  assert.ok(
    got.some((g) => want.test(g)),
    `no problem matches ${want}; got:\n${got.join("\n")}`,
  );
};

const CI = `version: flowsvc/pipeline/v1
env: {GREETING: hello}
credentials: {TOKEN: ci-token}
concurrency: {group: "deploy-\${{ input.ref }}", policy: cancel-running}
cancel_on: [pr.closed]
jobs:
  build:
    steps:
      - run: echo \${{ env.GREETING }} {{ literal }}
      - run: make
      - uses: emit
        with: {type: built, payload: {ref: "\${{ input.ref }}"}}
      - run: echo done
  test:
    needs: build
    if: \${{ needs.build.status == "success" && input.ref != "skip" }}
    credentials: {TOKEN: test-token, OTHER: other}
    env: {GREETING: hi}
    script: |
      echo testing
  gate:
    needs: [test]
    approval: {prompt: "Deploy \${{ input.ref }}?", fields: [{name: reason, type: text, required: true}]}
  wait:
    needs: gate
    wait_for_event: {type: deploy.done, when: "\${{ event.payload.ok == true }}", timeout: 5m}
    concurrency: {group: waits}
`;

test("a CI pipeline compiles to one graph: jobs to nodes, needs to edges, steps in order", () => {
  const p = assertPipeline(CI);
  assert.equal(p.workflow, "flowsvc/pipeline/v1");
  assert.deepEqual(
    p.graph.nodes.map((n) => `${n.id}:${n.type}`),
    ["build--step1:shell", "build--step2:emit", "build:shell", "test:code", "gate:approval", "wait:event"],
  );
  assert.deepEqual(
    p.graph.edges.map((e) => `${e.from}>${e.to}`),
    ["build--step1>build--step2", "build--step2>build", "build>test", "test>gate", "gate>wait"],
  );
  assert.deepEqual(p.concurrency, { group: "deploy-${{ input.ref }}", policy: "cancel-running", env: { GREETING: "hello" } });
  assert.deepEqual(p.cancel_on, ["pr.closed"]);
  assert.deepEqual(p.jobs["wait"], { nodes: ["wait"], concurrency: { group: "waits", policy: "queue", env: { GREETING: "hello" } } });
  assert.deepEqual(p.jobs["build"]!.nodes, ["build--step1", "build--step2", "build"]);
});

test("job-level credentials and env win over the workflow's; approval and wait jobs get none", () => {
  const nodes = Object.fromEntries(assertPipeline(CI).graph.nodes.map((n) => [n.id, n]));
  assert.deepEqual(nodes["build"]!.config["credentials"], { TOKEN: "ci-token" });
  assert.deepEqual(nodes["test"]!.config["credentials"], { TOKEN: "test-token", OTHER: "other" });
  assert.deepEqual(nodes["test"]!.config["env"], { GREETING: "hi" });
  assert.equal(nodes["gate"]!.config["credentials"], undefined);
  assert.equal(nodes["wait"]!.config["when"], " event.payload.ok == true ");
});

test("${{ }} expressions evaluate through the graph scope: env literal, input, steps/needs as nodes, literal {{ kept", () => {
  const nodes = Object.fromEntries(assertPipeline(CI).graph.nodes.map((n) => [n.id, n]));
  const scope = { input: { ref: "main" }, nodes: { build: { status: "success" as const, output: { x: 1 } } } };
  const cmd = evaluateConfig(nodes["build--step1"]!.config["command"], scope);
  assert.deepEqual(cmd, { ok: true, value: "echo hello {{ literal }}\nmake" });
  assert.deepEqual(evaluateConfig(nodes["gate"]!.config["prompt"], scope), { ok: true, value: "Deploy main?" });
  assert.deepEqual(evaluateIf(nodes["test"]!.if!, scope), { ok: true, value: true });
  assert.deepEqual(evaluateIf(nodes["test"]!.if!, { ...scope, input: { ref: "skip" } }), { ok: true, value: false });
  const stepsRead = assertPipeline(`jobs:
  a: {steps: [{run: x}]}
  b: {needs: a, steps: [{run: "echo \${{ steps.a.output.x }} \${{ 'env' }} \${{ env.A }}"}], env: {A: "q\\"uote"}}
`);
  const b = stepsRead.graph.nodes.find((n) => n.id === "b")!;
  assert.deepEqual(
    evaluateConfig(b.config["command"], scope.nodes ? { input: {}, nodes: { a: { status: "success", output: { x: 7 } } } } : scope),
    {
      ok: true,
      value: 'echo 7 env q"uote',
    },
  );
});

test("every node of a job carries the job's if and retry; a skipped job's steps are skipped too", () => {
  const p = assertPipeline(`jobs:
  a:
    if: input.go
    retry: {attempts: 3, backoff: 2s}
    steps: [{run: one}, {uses: emit, with: {type: x.y}}, {run: two}]
`);
  for (const n of p.graph.nodes) {
    assert.equal(n.if, "nodes.go".replace("nodes", "input"));
    assert.deepEqual(n.retry, { attempts: 3, backoff_ms: 2000 });
  }
});

const table: Array<[string, string, RegExp]> = [
  ["unknown top-level key", "jobs: {a: {steps: [{run: x}]}}\ntriggers: push\n", /^line 2, column 1: triggers: unknown key "triggers"/],
  [
    "unknown job key",
    "jobs:\n  a:\n    steps: [{run: x}]\n    runs-on: linux\n",
    /^line 4, column 5: jobs\.a\.runs-on: unknown key "runs-on"/,
  ],
  [
    "unknown step key",
    "jobs:\n  a:\n    steps:\n      - run: x\n        shell: zsh\n",
    /^line 5, column 9: jobs\.a\.steps\[0\]\.shell: unknown key/,
  ],
  [
    "unknown job in needs",
    "jobs:\n  a:\n    needs: [b, zz]\n    steps: [{run: x}]\n  b: {steps: [{run: y}]}\n",
    /^line 3, column 16: jobs\.a\.needs\[1\]: no job is named "zz"/,
  ],
  [
    "cycle in needs",
    "jobs:\n  a:\n    needs: c\n    steps: [{run: x}]\n  b: {needs: a, steps: [{run: x}]}\n  c: {needs: b, steps: [{run: x}]}\n",
    /^line 3, column 12: jobs\.a\.needs: needs make a cycle: a -> c -> b -> a|cycle/,
  ],
  [
    "a script file (the server never receives the files beside a pipeline)",
    "jobs:\n  a:\n    script: {file: deploy.sh}\n",
    /^line 3, column \d+: jobs\.a\.script(\.file)?: a file is not sent with the pipeline/,
  ],
  ["a job needing itself", "jobs:\n  a: {needs: a, steps: [{run: x}]}\n", /jobs\.a\.needs: a job cannot need itself/],
  [
    "${{ }} in a workflow credentials value",
    "credentials:\n  TOKEN: ${{ input.name }}\njobs: {a: {steps: [{run: x}]}}\n",
    /^line 2, column 10: credentials\.TOKEN: a credentials: value is a credential NAME/,
  ],
  [
    "${{ }} in a job credentials value",
    "jobs:\n  a:\n    credentials: {T: 'x-${{ env.A }}'}\n    steps: [{run: x}]\n",
    /^line 3, column 22: jobs\.a\.credentials\.T: .*not allowed/,
  ],
  [
    "LD_PRELOAD as a credential variable",
    "jobs:\n  a:\n    credentials: {LD_PRELOAD: tok}\n    steps: [{run: x}]\n",
    /jobs\.a\.credentials\.LD_PRELOAD/,
  ],
  [
    "a bad expression in run",
    "jobs:\n  a:\n    steps:\n      - run: echo ${{ input.x + }}\n",
    /^line 4, column 14: jobs\.a\.steps\[0\]\.run: /,
  ],
  ["an unknown variable", "jobs:\n  a:\n    steps:\n      - run: echo ${{ secrets.X }}\n", /^line 4, column 14: .*secrets/],
  ["an unclosed ${{", "jobs:\n  a:\n    steps:\n      - run: echo ${{ input.x\n", /no closing "}}"/],
  ["a bad if", "jobs:\n  a:\n    if: ${{ input. }}\n    steps: [{run: x}]\n", /^line 3, column 9: jobs\.a\.if: /],
  [
    "a wait when reading input",
    "jobs:\n  w:\n    wait_for_event: {type: x.y, when: '${{ input.a }}'}\n",
    /^line 3, column 39: jobs\.w\.wait_for_event\.when: /,
  ],
  [
    "a bad concurrency group hole",
    "concurrency: {group: 'd-${{ input. }}'}\njobs: {a: {steps: [{run: x}]}}\n",
    /^line 1, column 22: concurrency\.group/,
  ],
  ["a bad policy", "concurrency: {group: d, policy: newest}\njobs: {a: {steps: [{run: x}]}}\n", /concurrency\.policy/],
  [
    "two kinds in one job",
    "jobs:\n  a:\n    steps: [{run: x}]\n    script: echo\n",
    /^line 4, column 13: jobs\.a\.script: a job has exactly one of/,
  ],
  ["no kind", "jobs:\n  a: {needs: []}\n", /jobs\.a: a job has exactly one of/],
  ["a step with run and uses", "jobs:\n  a:\n    steps: [{run: x, uses: emit}]\n", /jobs\.a\.steps\[0\]: a step has exactly one/],
  [
    "an unknown uses kind",
    "jobs:\n  a:\n    steps: [{uses: teleport}]\n",
    /^line 3, column 20: jobs\.a\.steps\[0\]\.uses: node a\.type: unknown node type "teleport"/,
  ],
  [
    "a bad with: value, at its key",
    'jobs:\n  a:\n    steps:\n      - run: echo\n      - {uses: http, with: {url: "ftp://x"}}\n',
    /^line 5, column 34: jobs\.a\.steps\[1\]\.with\.url: must be an http:\/\/ or https:\/\/ URL$/,
  ],
  [
    "a missing with: value",
    "jobs:\n  a:\n    steps: [{uses: http, with: {}}]\n",
    /^line 3, column 32: jobs\.a\.steps\[0\]\.with\.url: required$/,
  ],
  [
    "an unknown with: key",
    'jobs:\n  a:\n    steps: [{uses: http, with: {url: "https://x", colour: 1}}]\n',
    /^line 3, column 32: jobs\.a\.steps\[0\]\.with: unknown key "colour"$/,
  ],
  [
    "a bad approval field, at the field",
    "jobs:\n  a:\n    approval:\n      prompt: x\n      fields:\n        - {name: r, type: nope}\n",
    /^line 6, column 27: jobs\.a\.approval\.fields\[0\]\.type: must be one of text, textarea, select$/,
  ],
  [
    "GitHub Actions' on:, with where a pipeline's start is set",
    "on: push\njobs: {a: {steps: [{run: x}]}}\n",
    /^line 1, column 1: on: unknown key "on" \(a pipeline runs when submitted \(flow submit\), or on an event through a handler: flow handler set/,
  ],
  [
    "GitHub Actions' runs-on and timeout-minutes, with this pipeline's word for them",
    "jobs:\n  a:\n    runs-on: ubuntu-latest\n    timeout-minutes: 5\n    steps: [{run: x}]\n",
    /^line 3, column 5: jobs\.a\.runs-on: unknown key "runs-on" \(choose agents with requires: <capability>\)$/,
  ],
  [
    "a key named like an Object method is just unknown",
    "jobs:\n  a:\n    toString: 1\n    steps: [{run: x}]\n",
    /jobs\.a\.toString: unknown key "toString"$/,
  ],
  [
    "an expression reading an env value that has a ${{ }} of its own",
    'env: {C: "${{ input.c }}"}\njobs:\n  a:\n    env: {D: "${{ env.C }}"}\n    steps: [{run: x}]\n',
    /^line 4, column 14: jobs\.a\.env\.D: env\.C has a \$\{\{ \}\} of its own; an expression reads only literal env values/,
  ],
  [
    "an if: of two holes",
    "jobs:\n  a:\n    if: ${{ input.a }} && ${{ input.b }}\n    steps: [{run: x}]\n",
    /^line 3, column 9: jobs\.a\.if: is one expression: write it bare or inside one \$\{\{ \}\}/,
  ],
  [
    "a when: with text around its hole",
    "jobs:\n  w:\n    wait_for_event: {type: x.y, when: 'ok ${{ event.payload.ok }}'}\n",
    /^line 3, column 39: jobs\.w\.wait_for_event\.when: is one expression/,
  ],
  ["a bad duration", "jobs:\n  a: {timeout: soon, steps: [{run: x}]}\n", /jobs\.a\.timeout/],
  ["a bad job id", "jobs:\n  'a--b': {steps: [{run: x}]}\n", /jobs.*must be 1-48 characters/],
  [
    "a wrong version",
    "version: flowsvc/pipeline/v2\njobs: {a: {steps: [{run: x}]}}\n",
    /^line 1, column 10: version: must be "flowsvc\/pipeline\/v1"/,
  ],
  ["no jobs", "env: {A: b}\n", /jobs: required/],
  ["not a map", "- a\n- b\n", /line 1, column 1: \(document\)/],
  ["a YAML syntax error", "jobs:\n  a: {steps: [{run: x}]\n", /^line \d+, column \d+: \(document\): /],
  [
    "a duplicate key",
    "jobs:\n  a: {steps: [{run: x}]}\n  a: {steps: [{run: y}]}\n",
    /^line 3, column 3: \(document\): Map keys must be unique/,
  ],
  ["two documents", "jobs: {a: {steps: [{run: x}]}}\n---\njobs: {}\n", /\(document\)/],
];

test("env.X of a literal value, a job's own literal over a holed workflow value, and a group reading a holed value all compile", () => {
  assertPipeline(`env: {A: x, C: "\${{ input.c }}"}
concurrency: {group: "g-\${{ env.C }}"}
jobs:
  a:
    env: {B: "\${{ env.A }}-y", C: lit}
    concurrency: {group: "j-\${{ env.B }}"}
    steps: [{run: "echo \${{ env.C }} env.C"}]
`);
});

for (const [name, text, want] of table) test(`refused at compile with line and column: ${name}`, () => refusedWith(text, want));

test("a workflow's or a job's env: refuses what core's env rule refuses, at the variable", () => {
  const hostile = ["FLOW_TOKEN", "LD_PRELOAD", "LD_AUDIT", "BASH_ENV", "PATH", "A=B", '""', "X".repeat(10_000)];
  const env = `{OK: 1, ${hostile.map((n) => `${n.includes("=") ? JSON.stringify(n) : n}: x`).join(", ")}}`;
  for (const where of ["workflow", "job"]) {
    const text = where === "workflow" ? `env: ${env}\njobs: {a: {steps: [{run: x}]}}\n` : `jobs: {a: {env: ${env}, steps: [{run: x}]}}\n`;
    const got = refused(text);
    const prefix = where === "workflow" ? "env" : "jobs\\.a\\.env";
    for (const want of [
      new RegExp(`${prefix}\\.FLOW_TOKEN: env variable "FLOW_TOKEN" is refused: FLOW_\\* variables are reserved`),
      new RegExp(`${prefix}\\.LD_PRELOAD: env variable "LD_PRELOAD" is refused: the dynamic loader`),
      new RegExp(`${prefix}\\.LD_AUDIT: env variable "LD_AUDIT" is refused`),
      new RegExp(`${prefix}\\.BASH_ENV: env variable "BASH_ENV" is refused: a shell`),
      new RegExp(`${prefix}\\.PATH: env variable "PATH" is refused`),
      new RegExp(`${prefix}\\["A=B"\\]: env variable "A=B" is not an environment variable name`),
      new RegExp(`${prefix}\\[""\\]: an env variable is empty`),
      new RegExp(`${prefix}\\["X{64}\\.\\.\\."\\]: an env variable is at most 100 characters`),
    ])
      assert.ok(
        got.some((g) => want.test(g)),
        `${where}: no problem matches ${want}; got:\n${got.join("\n")}`,
      );
  }
  refusedWith('env: {"LD_\\0PRELOAD": x}\njobs: {a: {steps: [{run: x}]}}\n', /env.*(NUL|not an environment variable name)/);
  refusedWith('env: {"A\\ud800": x}\njobs: {a: {steps: [{run: x}]}}\n', /env.*(lone UTF-16 surrogate|not an environment variable name)/);
});

test("hostile input is refused with a position, never thrown and never slow", () => {
  const t0 = Date.now();
  refusedWith('jobs:\n  a:\n    steps: [{run: "x\\0y"}]\n', /^line 3, column 19: jobs\.a\.steps\[0\]\.run: holds a NUL/);
  refusedWith("jobs:\n  a:\n    steps: [{run: x\u0000y}]\n", /NUL|control|character/i);
  refusedWith('jobs:\n  a:\n    steps: [{run: "\\ud800"}]\n', /lone UTF-16 surrogate/);
  refusedWith(
    "jobs:\n  a:\n    steps: [{run: x}]\n    retry: {attempts: 1e400}\n",
    /^line 4, column 23: jobs\.a\.retry\.attempts: is a number outside the range/,
  );
  refusedWith(`jobs: ${"[".repeat(100_000)}${"]".repeat(100_000)}\n`, /^line 1, column \d+: \(document\): brackets nest more than 64 deep/);
  refusedWith(Array.from({ length: 400 }, (_, i) => `${" ".repeat(i)}a:`).join("\n"), /indented more than 256 columns/);
  refusedWith(
    `jobs:\n${Array.from({ length: 60 }, (_, i) => `${"  ".repeat(i + 1)}a${i}:`).join("\n")} x\n`,
    /nested more than 40 levels deep/,
  );
  const bomb = ["a: &a [x,x,x,x,x,x,x,x,x]"];
  for (const [from, to] of [
    ["a", "b"],
    ["b", "c"],
    ["c", "d"],
    ["d", "e"],
    ["e", "f"],
    ["f", "g"],
  ])
    bomb.push(`${to}: &${to} [${Array(9).fill(`*${from}`).join(",")}]`);
  refusedWith(`${bomb.join("\n")}\njobs: {x: {steps: [{run: x}]}}\n`, /aliases \(\*name\) expand more than 100 times/);
  refusedWith("jobs:\n  a:\n    steps: [{run: !!binary aGVsbG8=}]\n", /^line 3, column 28: jobs\.a\.steps\[0\]\.run: is not a string/);
  refusedWith(`jobs: {a: {steps: [{run: "${"x".repeat(PIPELINE_LIMITS.textBytes)}"}]}}\n`, /the limit is 1048576/);
  assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0} ms`);
});

test("a few aliases are fine; a refusal is invalid_argument (exit 2) naming every problem on its own line", () => {
  const p = assertPipeline("jobs:\n  a: {steps: [&r {run: echo}, *r, *r]}\n");
  assert.deepEqual(p.graph.nodes[0]!.config["command"], "echo\necho\necho");
  const problems = refused("jobs:\n  a:\n    foo: 1\n    bar: 2\n    steps: [{run: x}]\n");
  assert.equal(problems.length, 2);
  const err = pipelineError([{ line: 3, column: 5, path: "jobs.a.foo", message: 'unknown key "foo"' }]);
  assert.equal(err.code, "invalid_argument");
  assert.equal(exitStatusOf(err.code), 2);
  assert.equal(err.message, 'line 3, column 5: jobs.a.foo: unknown key "foo"');
});

test("event types in cancel_on and wait_for_event follow the emit rule", () => {
  refusedWith("cancel_on: ['bad type!']\njobs: {a: {steps: [{run: x}]}}\n", /^line 1, column 13: cancel_on\[0\]: /);
  refusedWith("jobs:\n  w: {wait_for_event: {type: ''}}\n", /jobs\.w\.wait_for_event\.type/);
});

test("a run:, env: or prompt that is one ${{ }} is text when it runs: a number's digits, a list's JSON (the node takes only text)", () => {
  const p = assertPipeline(`jobs:
  g: {approval: {prompt: "\${{ input.n }}"}}
  a:
    needs: g
    env: {N: "\${{ input.n }}", L: " \${{ input.list }} ", B: "\${{ steps.g.output.ok }}", S: "\${{ input.s }}"}
    steps: [{run: "\${{ input.n }}"}]
  w: {steps: [{uses: emit, with: {type: t, payload: "\${{ input.list }}"}}]}
`);
  const nodes = Object.fromEntries(p.graph.nodes.map((n) => [n.id, n]));
  const scope = { input: { n: 3, list: [1, "a"], s: 'x"y' }, nodes: { g: { status: "success" as const, output: { ok: true } } } };
  assert.deepEqual(evaluateConfig(nodes["g"]!.config["prompt"], scope), { ok: true, value: "3" });
  assert.deepEqual(evaluateConfig(nodes["a"]!.config["command"], scope), { ok: true, value: "3" });
  assert.deepEqual(evaluateConfig(nodes["a"]!.config["env"], scope), {
    ok: true,
    value: { N: "3", L: ' [1,"a"] ', B: "true", S: 'x"y' },
  });
  // A uses: step's with: keeps the value's type (its node takes any JSON there).
  assert.deepEqual(evaluateConfig(nodes["w"]!.config["payload"], scope), { ok: true, value: [1, "a"] });
});

void test("a job's if: and a wait's when: the checker types as other than bool are refused at their line; a field read is left to its value", () => {
  refusedWith("jobs:\n  a:\n    if: ${{ 1 + 2 }}\n    steps: [{run: x}]\n", /^line 3, column \d+: jobs\.a\.if: .*is a int, not a bool/);
  refusedWith(
    "jobs:\n  a:\n    wait_for_event: {type: x.y, when: 'string(event.type)'}\n",
    /^line 3, column \d+: jobs\.a\.wait_for_event\.when: .*is a string, not a bool/,
  );
  assert.equal(compilePipeline("jobs:\n  a:\n    if: ${{ input.go }}\n    steps: [{run: x}]\n").ok, true);
  assert.equal(compilePipeline("jobs:\n  a:\n    wait_for_event: {type: x.y, when: 'event.payload.ok'}\n").ok, true);
});
