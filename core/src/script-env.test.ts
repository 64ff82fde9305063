import { test } from "node:test";
import assert from "node:assert/strict";
import { composeScriptEnv, prependPath, triggerEnv } from "./script-env.js";
import type { FlowVars } from "./script-env.js";

const flowVars: FlowVars = {
  FLOW_AGENT_SOCKET: "/w/j/agent.sock",
  FLOW_AGENT_PID: "42",
  FLOW_AGENT_ID: "agt-1",
  FLOW_WORKFLOW_ID: "run-1",
  FLOW_ACTIVITY_ID: "job-1",
  FLOW_INPUT_FILE: "/w/j/input.json",
};

const agentEnv = {
  HOME: "/home/agent",
  USER: "agent",
  LANG: "C.UTF-8",
  LC_ALL: "C.UTF-8",
  LC_CTYPE: "C",
  TZ: "UTC",
  SSL_CERT_FILE: "/etc/ssl/cert.pem",
  PATH: "/usr/bin:/bin",
  AWS_SECRET_KEY: "do-not-leak",
  FLOW_JOB_TOKEN: "job-token",
  FLOW_SERVER_URL: "http://x",
  NODE_OPTIONS: "--inspect",
  LCX: "no",
};

const compose = (claimEnv: Record<string, string>, trigger?: Record<string, unknown>) =>
  composeScriptEnv({ agentEnv, claimEnv, trigger, flowVars, path: prependPath("/opt/flow/bin", agentEnv.PATH) });

void test("only the passthrough list comes from the agent's environment", () => {
  const env = compose({});
  for (const name of ["HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SSL_CERT_FILE"]) {
    assert.equal(env[name], agentEnv[name as keyof typeof agentEnv], name);
  }
  for (const name of ["AWS_SECRET_KEY", "FLOW_JOB_TOKEN", "FLOW_SERVER_URL", "NODE_OPTIONS", "LCX"]) {
    assert.equal(env[name], undefined, name);
  }
  assert.ok(!Object.values(env).includes("do-not-leak"));
});

void test("claim env (workflow env over secrets) wins over passthrough values", () => {
  const env = compose({ API_TOKEN: "s3cret", HOME: "/workflow/home" });
  assert.equal(env["API_TOKEN"], "s3cret");
  assert.equal(env["HOME"], "/workflow/home");
});

void test("service variables and PATH win over workflow env", () => {
  const env = compose({ FLOW_AGENT_SOCKET: "/evil", FLOW_INPUT_FILE: "/evil.json", FLOW_WORKFLOW_ID: "run-x", PATH: "/evil" });
  assert.equal(env["FLOW_AGENT_SOCKET"], "/w/j/agent.sock");
  assert.equal(env["FLOW_INPUT_FILE"], "/w/j/input.json");
  assert.equal(env["FLOW_WORKFLOW_ID"], "run-1");
  assert.equal(env["FLOW_AGENT_PID"], "42");
  assert.equal(env["FLOW_AGENT_ID"], "agt-1");
  assert.equal(env["FLOW_ACTIVITY_ID"], "job-1");
  assert.equal(env["PATH"], "/opt/flow/bin:/usr/bin:/bin");
});

void test("a manual start sets CI_TRIGGER_EVENT=manual unless the workflow env sets it", () => {
  assert.equal(compose({})["CI_TRIGGER_EVENT"], "manual");
  assert.equal(compose({}, { type: "manual" })["CI_TRIGGER_EVENT"], "manual");
  assert.equal(compose({ CI_TRIGGER_EVENT: "custom" }, { type: "push" })["CI_TRIGGER_EVENT"], "custom");
});

void test("scalar trigger fields become CI_TRIGGER_* and nested ones stay in the file", () => {
  const env = triggerEnv({ type: "push", event: "evt-1", sha: "0123456789abcdef", ref: "refs/heads/main", payload: { a: 1 } });
  assert.deepEqual(env, {
    CI_TRIGGER_EVENT: "push",
    CI_TRIGGER_EVENT_ID: "evt-1",
    CI_TRIGGER_SHA: "0123456789abcdef",
    CI_TRIGGER_SHORT_SHA: "0123456",
    CI_TRIGGER_REF: "refs/heads/main",
  });
});

void test("a variable named __proto__ stays an ordinary entry", () => {
  const claimEnv = JSON.parse('{"__proto__": "x"}') as Record<string, string>;
  const env = compose(claimEnv);
  assert.equal(Object.getPrototypeOf(env), Object.prototype);
  assert.equal(Object.getOwnPropertyDescriptor(env, "__proto__")?.value, "x");
});

void test("prependPath puts the client first once", () => {
  assert.equal(prependPath("/c", "/c:/usr/bin::/bin"), "/c:/usr/bin:/bin");
  assert.equal(prependPath(undefined, "/usr/bin"), "/usr/bin");
  assert.equal(prependPath("/c", undefined), "/c");
});
