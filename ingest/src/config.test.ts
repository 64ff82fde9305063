/**
 * flowsvc-ingest's configuration (config.ts): the app's port and the metrics port, their defaults,
 * and the refusals that name the variable (hostile values included).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "@flowsvc/core";
import { loadIngestConfig } from "./config.js";

const KEY = Buffer.alloc(32, 7).toString("base64");
const good = { FLOWSVC_DATABASE_URL: "postgres://u@127.0.0.1:5432/flowsvc", FLOWSVC_MASTER_KEY: KEY };

/** The problems a refused configuration lists (its FlowError("config") details). */
const problemsOf = (env: NodeJS.ProcessEnv): string[] => {
  try {
    loadIngestConfig(env);
  } catch (err) {
    assert.ok(err instanceof FlowError);
    assert.equal(err.code, "config");
    return err.details?.["problems"] as string[];
  }
  assert.fail(`the configuration was accepted: ${JSON.stringify(env)}`);
};

void test("defaults: the app on 0.0.0.0:8080, /metrics on 9090; both ports may be set (0: a free port each)", () => {
  const c = loadIngestConfig(good);
  assert.deepEqual([c.host, c.port, c.metricsPort], ["0.0.0.0", 8080, 9090]);
  const set = loadIngestConfig({ ...good, FLOWSVC_HOST: "127.0.0.1", FLOWSVC_PORT: "8000", FLOWSVC_METRICS_PORT: "9100" });
  assert.deepEqual([set.host, set.port, set.metricsPort], ["127.0.0.1", 8000, 9100]);
  assert.equal(loadIngestConfig({ ...good, FLOWSVC_METRICS_PORT: "" }).metricsPort, 9090, "empty is unset");
  const zero = loadIngestConfig({ ...good, FLOWSVC_PORT: "0", FLOWSVC_METRICS_PORT: "0" });
  assert.deepEqual([zero.port, zero.metricsPort], [0, 0]);
});

void test("a bad FLOWSVC_METRICS_PORT refuses the start, naming the variable", () => {
  for (const bad of ["70000", "8080\u0000", "-1", "1e400", "9090.5", "metrics", "\ud800"]) {
    const problems = problemsOf({ ...good, FLOWSVC_METRICS_PORT: bad });
    assert.equal(problems.length, 1, `${JSON.stringify(bad)}: ${problems.join("; ")}`);
    assert.match(problems[0]!, /^FLOWSVC_METRICS_PORT: /, JSON.stringify(bad));
  }
});

void test("the metrics port equal to the app's is refused with the other problems, naming both variables", () => {
  assert.deepEqual(problemsOf({ ...good, FLOWSVC_METRICS_PORT: "8080" }), [
    "FLOWSVC_METRICS_PORT: must differ from FLOWSVC_PORT (both 8080): /metrics has a port of its own",
  ]);
  const problems = problemsOf({ ...good, FLOWSVC_PORT: "9090", FLOWSVC_LOG_LEVEL: "loud" });
  assert.deepEqual(
    problems.map((p) => p.split(":")[0]),
    ["FLOWSVC_LOG_LEVEL", "FLOWSVC_METRICS_PORT"],
  );
});
