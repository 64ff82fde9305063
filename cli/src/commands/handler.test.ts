import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { InvalidArgumentError } from "./parsers.js";
import { FlowError } from "@flowsvc/core";
import { HANDLER_TEMPLATES, chooseReaction, collectPatterns, parseNodeConfig } from "./handler.js";

void test("--on takes comma-separated patterns, repeatable, without duplicates", () => {
  assert.deepEqual(collectPatterns("deploy.*, run.failed", undefined), ["deploy.*", "run.failed"]);
  assert.deepEqual(collectPatterns("*,deploy.*", ["deploy.*"]), ["deploy.*", "*"]);
});

void test("a malformed --on pattern is a usage error that says what is wrong", () => {
  assert.throws(
    () => collectPatterns("a,,b", undefined),
    (e: unknown) => e instanceof InvalidArgumentError && /empty pattern/.test(e.message),
  );
  assert.throws(
    () => collectPatterns("has space", undefined),
    (e: unknown) => e instanceof InvalidArgumentError && /prefix wildcard/.test(e.message),
  );
  assert.throws(() => collectPatterns("run.**", undefined), InvalidArgumentError);
});

void test("a handler's reaction is exactly one of a file (script, or pipeline with --as yaml), --graph, --node", () => {
  assert.deepEqual(chooseReaction("h.sh", {}), { kind: "script", file: "h.sh" });
  assert.deepEqual(chooseReaction("p.yaml", { as: "yaml" }), { kind: "pipeline", file: "p.yaml" });
  assert.deepEqual(chooseReaction("p.yaml", { as: "pipeline" }), { kind: "pipeline", file: "p.yaml" });
  assert.deepEqual(chooseReaction(undefined, { graph: "g" }), { kind: "graph", graph: "g" });
  assert.deepEqual(chooseReaction(undefined, { node: "emit", config: "{}" }), { kind: "node", type: "emit" });
  const refusals: Array<[string | undefined, Record<string, string>, RegExp]> = [
    [undefined, {}, /give the handler's script file, --graph/],
    ["h.sh", { graph: "g" }, /give one reaction/],
    [undefined, { graph: "g", node: "emit" }, /give one reaction/],
    [undefined, { graph: "g", config: "{}" }, /--config goes with --node/],
    [undefined, { graph: "g", as: "yaml" }, /--as yaml describes a file/],
    ["h.sh", { as: "LD_PRELOAD" }, /--as LD_PRELOAD: a handler's file is a script or a pipeline/],
  ];
  for (const [file, opts, message] of refusals)
    assert.throws(
      () => chooseReaction(file, opts),
      (e: unknown) => e instanceof FlowError && e.code === "invalid_argument" && message.test(e.message),
      JSON.stringify([file, opts]),
    );
});

void test("--config is a JSON object or a usage error naming --config", () => {
  assert.deepEqual(parseNodeConfig('{"type":"x","n":1e308}'), { type: "x", n: 1e308 });
  assert.deepEqual(parseNodeConfig(undefined), {});
  // 1e400 would be sent as null (JSON.stringify of Infinity): refused here, as the API refuses it.
  for (const bad of ["[1]", "null", "{", '"\u0000"', '{"type":"x","n":1e400}'])
    assert.throws(
      () => parseNodeConfig(bad),
      (e: unknown) => e instanceof FlowError && /^--config: /.test(e.message),
      bad,
    );
});

const bashAvailable = spawnSync("bash", ["--version"]).status === 0;

void test("every starter script is valid bash", { skip: !bashAvailable && "no bash" }, () => {
  for (const [name, t] of Object.entries(HANDLER_TEMPLATES)) {
    const r = spawnSync("bash", ["-n"], { input: t.script });
    assert.equal(r.status, 0, `${name}: ${r.stderr.toString()}`);
  }
});

void test(
  "the router dispatches on CI_TRIGGER_EVENT and reads payload strings without jq or python3",
  { skip: !bashAvailable && "no bash" },
  () => {
    const dir = mkdtempSync(join(tmpdir(), "flowsvc-router-"));
    try {
      const script = join(dir, "router.sh");
      const input = join(dir, "input.json");
      writeFileSync(script, HANDLER_TEMPLATES.router.script);
      writeFileSync(
        input,
        JSON.stringify({ type: "release.published", event: "evt-1", payload: { tag: "v1.2.3", note: 'a "quoted" word' } }),
      );
      const run = (event: string): string =>
        execFileSync("bash", ["-eu", script], {
          env: { PATH: "/usr/bin:/bin", FLOW_INPUT_FILE: input, CI_TRIGGER_EVENT: event, CI_TRIGGER_EVENT_ID: "evt-1" },
        }).toString();
      assert.equal(run("release.published"), "release v1.2.3 published\n");
      assert.match(run("something.else"), /no route for something\.else \(evt-1\)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
