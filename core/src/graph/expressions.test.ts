import { test } from "node:test";
import assert from "node:assert/strict";
import { celToJson, evaluateConfig, evaluateIf, evaluateSwitch, evaluateWhen, referencedNodeIds, templateParts } from "./expressions.js";
import type { GraphScope } from "./model.js";

const scope: GraphScope = {
  input: { item: "widget", count: 3, tags: ["a", "b"], nested: { deep: true } },
  nodes: {
    fetch: { status: "success", output: { status: 200, body: { verdict: "ship it", n: 2 } } },
    "lint-step": { status: "skipped", output: null },
  },
};

void test("evaluateConfig resolves $expr and $template anywhere, deep, and leaves the rest as is", () => {
  const config = {
    url: { $template: "https://x/{{ input.item }}/{{input.count}}" },
    method: "POST",
    headers: { "X-N": { $template: "{{ nodes.fetch.output.body.n }}" } },
    body: {
      list: [1, { $expr: "input.tags" }, { inner: { $expr: "nodes.fetch.output.status == 200" } }],
      literal: "{{ not evaluated }}",
      skipped: { $expr: 'nodes["lint-step"].status' },
      computed: { $expr: '{"a": dyn(1), "b": dyn([1, 2]), "c": input.nested}' },
    },
  };
  assert.deepEqual(evaluateConfig(config, scope), {
    ok: true,
    value: {
      url: "https://x/widget/3",
      method: "POST",
      headers: { "X-N": "2" },
      body: {
        list: [1, ["a", "b"], { inner: true }],
        literal: "{{ not evaluated }}",
        skipped: "skipped",
        computed: { a: 1, b: [1, 2], c: { deep: true } },
      },
    },
  });
  // The input is not changed.
  assert.deepEqual(config.url, { $template: "https://x/{{ input.item }}/{{input.count}}" });
});

void test("a template hole is its value's text: strings as is, anything else as JSON", () => {
  const t = (template: string) => evaluateConfig({ $template: template }, scope);
  assert.deepEqual(t("{{ input.item }}"), { ok: true, value: "widget" });
  assert.deepEqual(t("n={{ input.count }} i={{ 2 + 3 }}"), { ok: true, value: "n=3 i=5" });
  assert.deepEqual(t("{{ input.tags }}|{{ input.nested }}|{{ null }}|{{ true }}"), {
    ok: true,
    value: '["a","b"]|{"deep":true}|null|true',
  });
  assert.deepEqual(t("no holes"), { ok: true, value: "no holes" });
  assert.deepEqual(t(""), { ok: true, value: "" });
  assert.deepEqual(t("{{ input.item }}{{ input.item }}"), { ok: true, value: "widgetwidget" });
});

void test("evaluation errors name the config path; never thrown", () => {
  const r = evaluateConfig({ body: { a: [{ $expr: "input.missing" }] } }, scope);
  assert.equal(r.ok, false);
  assert.match((r as { error: string }).error, /^config\.body\.a\[0\]: .*missing/);
  const t = evaluateConfig({ url: { $template: "x {{ nodes.nope.output }}" } }, scope);
  assert.match((t as { error: string }).error, /^config\.url: \{\{ nodes\.nope\.output \}\}: /);
  const bad = evaluateConfig({ url: { $expr: "input." } }, scope);
  assert.match((bad as { error: string }).error, /^config\.url: .* at line 1, column 7$/);
  const unclosed = evaluateConfig({ url: { $template: "{{ input" } }, scope);
  assert.match((unclosed as { error: string }).error, /^config\.url: "\{\{" at character 1 has no closing/);
  // A value that is no JSON is refused, not mangled.
  const big = evaluateConfig({ n: { $expr: "9223372036854775807" } }, scope);
  assert.match((big as { error: string }).error, /^config\.n: the integer 9223372036854775807 is too large for JSON/);
  assert.match(
    (evaluateConfig({ d: { $expr: 'duration("5s")' } }, scope) as { error: string }).error,
    /^config\.d: a .* value cannot be a JSON value/,
  );
  // A deep config (as a caller that skipped parseGraph might pass) is refused, not a stack overflow.
  let deep: unknown = 1;
  for (let i = 0; i < 10_000; i++) deep = [deep];
  assert.match((evaluateConfig(deep, scope) as { error: string }).error, /nested more than 64 levels deep/);
});

void test("CEL values become JSON: ints as numbers, timestamps as RFC 3339, bytes as base64", () => {
  assert.deepEqual(celToJson(3n), { ok: true, value: 3 });
  assert.deepEqual(celToJson([1n, { a: -2n }]), { ok: true, value: [1, { a: -2 }] });
  assert.deepEqual(celToJson(new Date("2026-01-02T03:04:05Z")), { ok: true, value: "2026-01-02T03:04:05.000Z" });
  assert.deepEqual(celToJson(new Uint8Array([104, 105])), { ok: true, value: "aGk=" });
  assert.deepEqual(celToJson(new Map<unknown, unknown>([[1n, "x"]])), { ok: true, value: { "1": "x" } });
  assert.equal(celToJson(2n ** 60n).ok, false);
  assert.equal(celToJson(Number.NaN).ok, false);
  assert.deepEqual(evaluateConfig({ t: { $expr: 'timestamp("2026-01-02T03:04:05Z")' }, b: { $expr: 'b"hi"' } }, scope), {
    ok: true,
    value: { t: "2026-01-02T03:04:05.000Z", b: "aGk=" },
  });
});

void test("evaluateIf: a bool, or why not (an error, or a value that is not a bool)", () => {
  assert.deepEqual(evaluateIf('nodes.fetch.status == "success"', scope), { ok: true, value: true });
  assert.deepEqual(evaluateIf("input.count > 5.0", scope), { ok: true, value: false });
  assert.deepEqual(evaluateIf("input.count", scope), { ok: false, error: "the expression returned double, not a bool" });
  assert.equal(evaluateIf("nodes.nope.status == 'x'", scope).ok, false);
  assert.equal(evaluateIf("input.", scope).ok, false);
  assert.equal(evaluateIf("", scope).ok, false);
  assert.equal(evaluateIf("event.x", scope).ok, false, "an if cannot read event");
});

void test("evaluateWhen: true matches; false, an error or a non-bool declines", () => {
  const event = { type: "ci.done", payload: { sha: "abc" } };
  const s: GraphScope = { input: { sha: "abc" }, nodes: {} };
  assert.deepEqual(evaluateWhen("event.payload.sha == input.sha", s, event), { matched: true });
  assert.deepEqual(evaluateWhen('event.payload.sha == "zzz"', s, event), { matched: false });
  assert.equal(evaluateWhen("event.payload.missing", s, event).matched, false);
  assert.ok(evaluateWhen("event.payload.missing", s, event).error);
  assert.match(evaluateWhen("event.payload.sha", s, event).error!, /returned string, not a bool/);
});

void test("evaluateSwitch: exact equality routes; a sentence holding the word does not; default otherwise", () => {
  const cases = [
    { name: "auto", when: 'nodes.fetch.output.body.verdict == "ship"' },
    { name: "human", when: 'nodes.fetch.output.body.verdict == "review"' },
  ];
  assert.deepEqual(evaluateSwitch(cases, "human", scope), { ok: true, branch: "human" }, "'ship it' is not 'ship'");
  const shipped: GraphScope = { ...scope, nodes: { fetch: { status: "success", output: { body: { verdict: "ship" } } } } };
  assert.deepEqual(evaluateSwitch(cases, "human", shipped), { ok: true, branch: "auto" });
  assert.deepEqual(evaluateSwitch(cases, undefined, scope), { ok: false, error: "no case matched and the switch has no default" });
  assert.match(
    (evaluateSwitch([{ name: "x", when: "input.count" }], "x", scope) as { error: string }).error,
    /^case x: when returned double/,
  );
  assert.match((evaluateSwitch([{ name: "x", when: "input.none" }], "x", scope) as { error: string }).error, /^case x: /);
});

void test("templateParts splits text and holes; {{ without }} and empty holes are refused", () => {
  assert.deepEqual(templateParts("a {{ x }} b{{y}}"), [
    { text: "a " },
    { expr: " x ", offset: 4 },
    { text: " b" },
    { expr: "y", offset: 13 },
  ]);
  assert.throws(() => templateParts("a {{ x"), /"\{\{" at character 3 has no closing "\}\}"/);
  assert.throws(() => templateParts("{{}}"), /the hole at character 1 is empty/);
  assert.deepEqual(templateParts("only }} closes"), [{ text: "only }} closes" }]);
});

void test('referencedNodeIds: nodes.<id> and nodes["<id>"] outside string literals', () => {
  assert.deepEqual(referencedNodeIds('nodes.a.status == "success" && nodes["b-c"].output.x > 1.0 && has(nodes . d)'), ["a", "b-c", "d"]);
  assert.deepEqual(referencedNodeIds("nodes['e'].output"), ["e"]);
  assert.deepEqual(referencedNodeIds('"nodes.x" + \'nodes.y\' + r"nodes.z\\" + """nodes.w""" + b"nodes.v"'), []);
  assert.deepEqual(referencedNodeIds("input.nodes.x + mynodes.y + nodes[input.k].status"), []);
  assert.deepEqual(referencedNodeIds('"a\\"nodes.q" == nodes.real'), ["real"]);
});
