import assert from "node:assert/strict";
import { test } from "node:test";
import { Command } from "commander";
import { buildProgram } from "./program.js";
import { USER_COMMANDS, mayBeInScript, needsServerCommand, topCommandOf } from "./route.js";
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

void test("USER_COMMANDS lists exactly the program's top-level commands", () => {
  const io = {} as Stdio;
  const program = buildProgram({ env: {}, io, now: () => new Date(), setExitCode: () => undefined }, new Command("server"));
  assert.deepEqual([...program.commands.map((c) => c.name()), "help"].sort(), [...USER_COMMANDS].sort());
});

void test("the top-level command is found past the global options and their values", () => {
  assert.equal(topCommandOf(argv("--url", "http://x", "--project", "a/b", "server", "--port", "1")), "server");
  assert.equal(topCommandOf(argv("--help")), undefined);
});

void test("only `flow server`, help and a bare `flow` load the server command", () => {
  assert.equal(needsServerCommand(argv("server")), true);
  assert.equal(needsServerCommand(argv("--token", "t", "server")), true);
  assert.equal(needsServerCommand(argv("--help")), true);
  assert.equal(needsServerCommand(argv("help", "server")), true);
  assert.equal(needsServerCommand(argv()), true);
  assert.equal(needsServerCommand(argv("submit", "server")), false);
  assert.equal(needsServerCommand(argv("runs", "ls")), false);
});
