/**
 * `flow run` refuses what only a server runs, before anything starts: a pipeline (.yaml/.yml) or a
 * graph (.json) file unless --interpreter says how to run it, and (needsServer) the in-script calls
 * a local run cannot serve. Names are shown as typed when plain, JSON-quoted otherwise, so no
 * control character reaches the terminal. (The real `flow run` is in test/src/local-run.test.ts.)
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { FlowError } from "@flowsvc/core";
import { needsServer } from "./needs-server.js";
import { runLocal } from "./run-local.js";

const terminal = { stdout: () => Promise.resolve(), stderr: () => Promise.resolve() };
const attempt = (file: string, interpreter?: string): Promise<number> =>
  runLocal({ file, env: {}, cwd: "/nonexistent", processEnv: {}, terminal, ...(interpreter !== undefined ? { interpreter } : {}) });

void test("a pipeline or a graph file is refused before it is read, naming flow submit; hostile names are quoted", async () => {
  const cases: Array<[string, string, string]> = [
    ["ci.yaml", "a pipeline", "ci.yaml"],
    ["dir/CI.YML", "a pipeline", "dir/CI.YML"],
    ["g.JSON", "a graph", "g.JSON"],
    ["ev\nil.yaml", "a pipeline", '"ev\\nil.yaml"'],
    ["\u001b[2Jx.json", "a graph", '"\\u001b[2Jx.json"'],
    ["LD_PRELOAD=x.so .yml", "a pipeline", '"LD_PRELOAD=x.so .yml"'],
    ["\ud800.yaml", "a pipeline", '"\\ud800.yaml"'],
  ];
  for (const [file, kind, shown] of cases) {
    await assert.rejects(attempt(file), (err: unknown) => {
      assert.ok(err instanceof FlowError && err.code === "invalid_argument", String(err));
      assert.equal(err.message, `flow run runs scripts; ${shown} is ${kind}, which runs on a flowsvc server: flow submit ${shown}`);
      assert.match(err.hint ?? "", new RegExp(`^check it with \`flow check ${shown.replace(/[\\[\]"]/g, "\\$&")}\``));
      const text = err.message + (err.hint ?? "");
      assert.ok(
        ![...text].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f),
        `a control character in ${JSON.stringify(text)}`,
      );
      return true;
    });
  }
  // With --interpreter the file is a script: it gets as far as reading it (here: not found).
  await assert.rejects(attempt("ci.yaml", "cat"), (err: unknown) => err instanceof FlowError && !err.message.includes("flow submit"));
});

void test("needsServer names the flow submit of the script, its name quoted when it is not plain", () => {
  const err = needsServer("flow call", "a local run has no event bus or graphs", "deploy.sh");
  assert.equal(err.code, "invalid_argument");
  assert.equal(
    err.message,
    "flow call needs a flowsvc server (a local run has no event bus or graphs): run the script on one with `flow submit deploy.sh`",
  );
  assert.equal(
    needsServer("flow emit", "x", "a b\n.sh").message,
    'flow emit needs a flowsvc server (x): run the script on one with `flow submit "a b\\n.sh"`',
  );
});
