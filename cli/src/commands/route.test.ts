import assert from "node:assert/strict";
import { test } from "node:test";
import { buildProgram, commandsFor } from "./program.js";
import { USER_COMMANDS, mayBeInScript, topCommandOf } from "./route.js";
import type { Stdio } from "../print.js";

const argv = (...args: string[]): string[] => ["node", "flow", ...args];

void test("user commands and options never take the in-script path", () => {
  for (const name of ["submit", "runs", "secret", "server", "login"]) assert.equal(mayBeInScript(argv(name), {}), false, name);
  assert.equal(mayBeInScript(argv("--url", "x", "step"), {}), false);
  assert.equal(mayBeInScript(argv(), {}), false);
});

void test("a command the user CLI does not have may be in-script", () => {
  assert.equal(mayBeInScript(argv("step", "build", "--", "make"), {}), true);
  assert.equal(mayBeInScript(argv("wait-signal", "go"), {}), true);
});

void test("emit is the user command outside a script and the in-script one inside a script or a step body", () => {
  assert.equal(mayBeInScript(argv("emit", "x"), {}), false);
  assert.equal(mayBeInScript(argv("emit", "x"), { FLOW_AGENT_SOCKET: "/tmp/s" }), true);
  assert.equal(mayBeInScript(argv("emit", "x"), { FLOW_IDEMPOTENCY_KEY: "k" }), true);
});

void test("USER_COMMANDS lists exactly the program's top-level commands", async () => {
  const io = {} as Stdio;
  const program = await buildProgram({ env: {}, io, now: () => new Date(), setExitCode: () => undefined });
  assert.deepEqual([...program.commands.map((c) => c.name()), "help"].sort(), [...USER_COMMANDS].sort());
});

void test("the top-level command is found past the global options and their values", () => {
  assert.equal(topCommandOf(argv("--url", "http://x", "--project", "a/b", "server", "--port", "1")), "server");
  assert.equal(topCommandOf(argv("--help")), undefined);
});

void test("a command loads only its own module; help, a bare `flow`, an unknown name and completion load them all", () => {
  const names = (...args: string[]): string[] => commandsFor(argv(...args)).map((c) => c.name);
  assert.deepEqual(names("--token", "t", "server"), ["server"]);
  assert.deepEqual(names("submit", "server"), ["submit"]);
  assert.deepEqual(names("runs", "ls"), ["runs"]);
  assert.deepEqual(names("--version"), []);
  const all = [...USER_COMMANDS].filter((n) => n !== "help").sort();
  for (const args of [["--help"], ["help", "server"], [], ["stauts"], ["completion", "bash"]])
    assert.deepEqual(names(...args).sort(), all, args.join(" "));
});
