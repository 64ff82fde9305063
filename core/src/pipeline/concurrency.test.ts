import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "../errors.js";
import { assertPipeline, compilePipeline, formatPipelineProblem } from "./compile.js";
import { GROUP_NAME_LIMIT, concurrencyGroupName, jobGroupsOf, runGroupOf, type PipelineGroup } from "./concurrency.js";

const group = (text: string, env: Record<string, string> = {}): PipelineGroup => ({ group: text, policy: "queue", env });
const scope = (input: unknown, nodes: Record<string, { status: "success"; output: unknown }> = {}) => ({ input, nodes });

const refusedWith = (fn: () => unknown, message: RegExp): void =>
  assert.throws(fn, (e: unknown) => e instanceof FlowError && e.code === "invalid_argument" && message.test(e.message), String(message));

void test("a workflow group's holes read input and env; env values with holes are evaluated first", () => {
  const p = assertPipeline(`env: {STAGE: prod, TARGET: "\${{ input.region }}-\${{ env.STAGE }}"}
concurrency: {group: "deploy-\${{ env.TARGET }}-\${{ input.ref }}", policy: cancel-running}
jobs: {a: {steps: [{run: x}]}}
`);
  assert.deepEqual(runGroupOf(p, { region: "eu", ref: "main" }), { name: "deploy-eu-prod-main", cancelRunning: true });
  assert.equal(runGroupOf(assertPipeline("jobs: {a: {steps: [{run: x}]}}\n"), {}), undefined);
});

void test("a job's group sees its own env over the workflow's, and the output of the jobs it needs", () => {
  const p = assertPipeline(`env: {APP: web}
jobs:
  build: {steps: [{run: x}]}
  deploy:
    needs: build
    env: {APP: api}
    concurrency: {group: "\${{ env.APP }}-\${{ needs.build.output.version }}"}
    steps: [{run: y}]
`);
  const [g] = jobGroupsOf(p.jobs);
  assert.deepEqual(g && { job: g.job, nodes: g.nodes, policy: g.policy }, { job: "deploy", nodes: ["deploy"], policy: "queue" });
  assert.equal(concurrencyGroupName(g!, scope({}, { build: { status: "success", output: { version: "1.2" } } })), "api-1.2");
});

void test("a workflow group may not read steps or needs: refused at compile with its line and column", () => {
  const r = compilePipeline("concurrency: {group: 'x-${{ steps.a.output.v }}'}\njobs: {a: {steps: [{run: x}]}}\n");
  assert.equal(r.ok, false);
  assert.match(r.ok ? "" : formatPipelineProblem(r.problems[0]!), /^line 1, column 22: concurrency\.group: .*steps/);
});

void test("a group name is 1-256 characters of storable text: hostile values are refused, naming the field", () => {
  const at = { field: "jobs.deploy.concurrency.group" };
  refusedWith(
    () => concurrencyGroupName(group("${{ input.g }}"), scope({ g: "a\u0000b" }), at),
    /^jobs\.deploy\.concurrency\.group: .*NUL/,
  );
  refusedWith(
    () => concurrencyGroupName(group("x-${{ input.g }}"), scope({ g: "\ud800" })),
    /^concurrency\.group: .*lone UTF-16 surrogate/,
  );
  refusedWith(() => concurrencyGroupName(group("${{ input.g }}"), scope({ g: "y".repeat(100_000) })), /100000 characters .*give 1-256/);
  refusedWith(() => concurrencyGroupName(group("${{ input.g }}"), scope({ g: "" })), /evaluates to 0 characters/);
  refusedWith(
    () => concurrencyGroupName(group("${{ input.n }}"), scope({ n: Number.POSITIVE_INFINITY })),
    /^concurrency\.group: .*Infinity/,
  );
  refusedWith(() => concurrencyGroupName(group("${{ input.g }}"), scope({ g: { a: [1] } })), /evaluates to object: a group name is text/);
  refusedWith(() => concurrencyGroupName(group("${{ input.missing }}"), scope({})), /^concurrency\.group: .*missing/);
  refusedWith(() => concurrencyGroupName(group("${{ env.NOPE }}"), scope({})), /^concurrency\.group: .*NOPE/);
  assert.equal(concurrencyGroupName(group("${{ input.n }}"), scope({ n: 42 })), "42");
  assert.equal(concurrencyGroupName(group("g".repeat(GROUP_NAME_LIMIT)), scope({})).length, GROUP_NAME_LIMIT);
});

void test("a group's YAML text with a NUL or a lone surrogate escape, or over 256 characters, is refused at compile", () => {
  for (const text of ['"a\\0b"', '"a\\ud800"', `"${"g".repeat(257)}"`]) {
    const r = compilePipeline(`concurrency: {group: ${text}}\njobs: {a: {steps: [{run: x}]}}\n`);
    assert.equal(r.ok, false, text);
    assert.match(r.ok ? "" : r.problems.map(formatPipelineProblem).join("\n"), /line 1, column \d+: concurrency\.group/, text);
  }
});
