import { test } from "node:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import { FlowError } from "@flowsvc/core";
import { parseAgentConfig } from "./config.js";

const good = { FLOW_SERVER_URL: "http://127.0.0.1:8080/", FLOW_JOB_TOKEN: "tok", FLOW_AGENT_ID: "agt-1", PATH: "/usr/bin" };

/** The `problems` of the FlowError("config") that parsing `env` throws. */
const problemsOf = (env: Record<string, string | undefined>): string[] => {
  try {
    parseAgentConfig(env);
  } catch (err) {
    assert.ok(err instanceof FlowError);
    assert.equal(err.code, "config");
    return err.details?.["problems"] as string[];
  }
  assert.fail("the environment parsed");
};

void test("a launcher's environment parses, with capabilities split on commas", () => {
  const c = parseAgentConfig({ ...good, FLOW_AGENT_CAPABILITIES: "polyglot, gpu,,", FLOW_AGENT_WORKDIR: "/w", FLOW_CLIENT_DIR: "/c" });
  assert.ok(c.mode === "job");
  assert.equal(c.serverUrl, "http://127.0.0.1:8080");
  assert.equal(c.jobToken, "tok");
  assert.deepEqual(c.capabilities, ["polyglot", "gpu"]);
  assert.equal(c.workdir, "/w");
  assert.equal(c.clientDir, "/c");
  assert.equal(c.agentEnv["PATH"], "/usr/bin");
});

void test("a bad environment names every problem", () => {
  const problems = problemsOf({ FLOW_SERVER_URL: "not a url", FLOW_AGENT_WORKDIR: "relative" });
  for (const name of ["FLOW_SERVER_URL", "FLOW_JOB_TOKEN", "FLOW_AGENT_ID", "FLOW_AGENT_WORKDIR"]) {
    assert.ok(
      problems.some((p) => p.startsWith(`${name}:`)),
      `${name} in ${problems.join("; ")}`,
    );
  }
});

void test("the one-job mode (the default, and FLOW_AGENT_MODE=job) needs FLOW_JOB_TOKEN and says worker mode is the exception", () => {
  for (const mode of [undefined, "job"]) {
    const problems = problemsOf({ FLOW_SERVER_URL: "http://127.0.0.1:8080", FLOW_AGENT_ID: "agt-1", FLOW_AGENT_MODE: mode });
    assert.equal(problems.length, 1, problems.join("; "));
    assert.match(problems[0]!, /^FLOW_JOB_TOKEN: is required .*FLOW_AGENT_MODE=worker/);
  }
});

void test("worker mode parses without a token or agent id; those come with each job", () => {
  const c = parseAgentConfig({
    FLOW_SERVER_URL: "http://127.0.0.1:8080",
    FLOW_AGENT_MODE: "worker",
    FLOW_AGENT_CAPABILITIES: "polyglot",
    PATH: "/usr/bin",
  });
  assert.equal(c.mode, "worker");
  assert.equal(c.serverUrl, "http://127.0.0.1:8080");
  assert.deepEqual(c.capabilities, ["polyglot"]);
  assert.equal(c.agentEnv["PATH"], "/usr/bin");
  assert.ok(!("jobToken" in c));
});

void test("worker mode refuses a token in its environment, and an unknown mode is named with the two that exist", () => {
  assert.deepEqual(problemsOf({ FLOW_SERVER_URL: "http://127.0.0.1:8080", FLOW_AGENT_MODE: "worker", FLOW_JOB_TOKEN: "tok" }), [
    "FLOW_JOB_TOKEN: must not be set with FLOW_AGENT_MODE=worker (each job brings its own token)",
  ]);
  const problems = problemsOf({ ...good, FLOW_AGENT_MODE: "pool" });
  assert.deepEqual(problems, ['FLOW_AGENT_MODE: must be "job" (the default) or "worker"']);
});

void test("FLOW_AGENT_SPAWNER=off turns a worker's script spawner off (on by default); another value is named", () => {
  const worker = { FLOW_SERVER_URL: "http://127.0.0.1:8080", FLOW_AGENT_MODE: "worker" };
  const spawnerOf = (env: Record<string, string>) => {
    const c = parseAgentConfig(env);
    return c.mode === "worker" ? c.spawner : "not a worker";
  };
  assert.equal(spawnerOf(worker), true);
  assert.equal(spawnerOf({ ...worker, FLOW_AGENT_SPAWNER: "on" }), true);
  assert.equal(spawnerOf({ ...worker, FLOW_AGENT_SPAWNER: "off" }), false);
  for (const bad of ["OFF", "off\u0000", "0", "false", "of%66", "\ud800"])
    assert.deepEqual(problemsOf({ ...worker, FLOW_AGENT_SPAWNER: bad }), ['FLOW_AGENT_SPAWNER: must be "on" (the default) or "off"'], bad);
});

void test("FLOW_AGENT_LOG_LEVEL sets the least level of the agent's lines (info by default); another value is named", () => {
  assert.equal(parseAgentConfig(good).logLevel, "info");
  assert.equal(parseAgentConfig({ ...good, FLOW_AGENT_LOG_LEVEL: "warn" }).logLevel, "warn");
  assert.deepEqual(problemsOf({ ...good, FLOW_AGENT_LOG_LEVEL: "verbose" }), [
    'FLOW_AGENT_LOG_LEVEL: must be "debug", "info", "warn" or "error"',
  ]);
});

void test("FLOW_JOB_TOKEN_FILE: the token is read from the file (a Pod's mounted Secret); both ways at once, a missing file or hostile content are refused", () => {
  const dir = mkdtempSync(join(tmpdir(), "agent-token-"));
  try {
    const file = join(dir, "token");
    writeFileSync(file, "job_abc\n");
    const base = { FLOW_SERVER_URL: "http://127.0.0.1:8080", FLOW_AGENT_ID: "job-1" };
    const c = parseAgentConfig({ ...base, FLOW_JOB_TOKEN_FILE: file });
    assert.ok(c.mode === "job");
    assert.equal(c.jobToken, "job_abc");
    assert.match(problemsOf({ ...base, FLOW_JOB_TOKEN_FILE: file, FLOW_JOB_TOKEN: "x" })[0]!, /^FLOW_JOB_TOKEN: must not be set together/);
    assert.match(problemsOf({ ...base, FLOW_JOB_TOKEN_FILE: join(dir, "missing") })[0]!, /^FLOW_JOB_TOKEN_FILE: cannot read .*ENOENT/);
    writeFileSync(file, "job_a\u0000b");
    assert.match(problemsOf({ ...base, FLOW_JOB_TOKEN_FILE: file })[0]!, /^FLOW_JOB_TOKEN_FILE: .* does not hold one token/);
    assert.match(problemsOf({ ...base, FLOW_JOB_TOKEN_FILE: "relative/token" })[0]!, /^FLOW_JOB_TOKEN_FILE: must be an absolute path/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
