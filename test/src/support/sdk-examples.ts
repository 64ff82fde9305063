/**
 * What the Go and Rust durable examples (examples/go/durable.go, examples/rust/) must show through
 * a real server: three passes (the sleep parks the run, then the bounded wait does), each step body
 * run once (its stderr line once in the log) while every pass sees the step's value, and the wait
 * timing out to the language's empty value. Also where the local agents' HOME is (their Go setup
 * and the Rust binary go there).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { CliResult, TestServer } from "./server.js";
import { count } from "./runs.js";

/** `targets` is how the language prints the plan's list (Go `[eu us]`, Rust `["eu","us"]`). */
export const assertDurableExample = (r: CliResult, targets: string): void => {
  const log = r.stdout + r.stderr;
  assert.equal(r.code, 0, log);
  assert.equal(count(r.stdout, "pass starts"), 3, `a pass, then one after the sleep, then one after the wait:\n${log}`);
  assert.equal(count(log, "building"), 1, `the step body ran once:\n${log}`);
  assert.equal(count(log, "planning"), 1, `the function step ran once:\n${log}`);
  assert.equal(count(r.stdout, `version 1.4.2, targets ${targets}`), 3, `every pass sees the recorded values:\n${log}`);
  assert.equal(count(r.stdout, "approval: timed out"), 1, log);
};

/**
 * The HOME the server's local agents (and so their scripts) get: as root `<data-dir>/agent-home`
 * (cli/src/server/local-agents.ts), else the server's own, which the tests set to `home`.
 */
export const agentHome = (server: TestServer, home: string): string =>
  process.getuid?.() === 0 ? join(server.dataDir, "agent-home") : home;
