import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "@flowsvc/core";
import { parseAgentConfig } from "./config.js";

const good = { FLOW_SERVER_URL: "http://127.0.0.1:8080/", FLOW_JOB_TOKEN: "tok", FLOW_AGENT_ID: "agt-1", PATH: "/usr/bin" };

void test("a launcher's environment parses, with capabilities split on commas", () => {
  const c = parseAgentConfig({ ...good, FLOW_AGENT_CAPABILITIES: "polyglot, gpu,,", FLOW_AGENT_WORKDIR: "/w", FLOW_CLIENT_DIR: "/c" });
  assert.equal(c.serverUrl, "http://127.0.0.1:8080");
  assert.deepEqual(c.capabilities, ["polyglot", "gpu"]);
  assert.equal(c.workdir, "/w");
  assert.equal(c.clientDir, "/c");
  assert.equal(c.agentEnv["PATH"], "/usr/bin");
});

void test("a bad environment names every problem", () => {
  assert.throws(
    () => parseAgentConfig({ FLOW_SERVER_URL: "not a url", FLOW_AGENT_WORKDIR: "relative" }),
    (err: unknown) => {
      assert.ok(err instanceof FlowError);
      assert.equal(err.code, "config");
      const problems = err.details?.["problems"] as string[];
      for (const name of ["FLOW_SERVER_URL", "FLOW_JOB_TOKEN", "FLOW_AGENT_ID", "FLOW_AGENT_WORKDIR"]) {
        assert.ok(problems.some((p) => p.startsWith(`${name}:`)), `${name} in ${problems.join("; ")}`);
      }
      return true;
    },
  );
});
