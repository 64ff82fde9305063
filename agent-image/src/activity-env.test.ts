import { test } from "node:test";
import assert from "node:assert/strict";
import { composeActivityEnv } from "./activity-env.js";

void test("an activity gets the passthrough variables, the claim's env and PATH, and no FLOW_* variable", () => {
  const env = composeActivityEnv({
    agentEnv: {
      HOME: "/home/a",
      LC_ALL: "C",
      PATH: "/usr/bin:/bin",
      FLOW_JOB_TOKEN: "tok",
      FLOW_SERVER_URL: "http://x",
      SECRET_OF_AGENT: "no",
    },
    claimEnv: { DEPLOY_KEY: "k", HOME: "/override", FLOW_IDEMPOTENCY_KEY: "idk", FLOW_WORKFLOW_ID: "run-x" },
    clientDir: "/opt/flow/bin",
  });
  assert.deepEqual(env, { HOME: "/override", LC_ALL: "C", DEPLOY_KEY: "k", PATH: "/opt/flow/bin:/usr/bin:/bin" });
});

void test("without a PATH in the agent's environment an activity gets the usual one", () => {
  assert.equal(
    composeActivityEnv({ agentEnv: {}, claimEnv: { PATH: "/evil" }, clientDir: undefined })["PATH"],
    "/usr/local/bin:/usr/bin:/bin",
  );
});
