/**
 * `GET /api/v1/agents` (routes/agents.ts) over app.inject(): agents holding jobs come from
 * Postgres, local processes from the launchers, and a job's run is shown only to members of its
 * project.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { AgentJobRow } from "@flowsvc/store";
import { ask, assertError, createTestApp, dispatchJob, startScriptJob, type TestApp } from "../testing/test-app.js";
import { describeAgents, type AgentInfo } from "./agents.js";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(() => t.close());

test("agents holding jobs are listed with their status and run, and another project's run is hidden", async () => {
  assertError(await ask(t, "GET", "/api/v1/agents", { as: "none" }), 401, /no API token was sent/);
  assert.deepEqual((await ask(t, "GET", "/api/v1/agents", { as: "viewer" })).body, [], "no agent holds a job yet");

  const claimed = await startScriptJob(t, "echo claimed\n");
  const claim = await ask(t, "POST", "/agent/v1/claim", { as: { token: claimed.token }, body: { agent_id: "agt-claimer" } });
  assert.equal(claim.status, 200, claim.text);
  const waiting = await startScriptJob(t, "echo waiting\n"); // dispatched, not claimed yet
  const theirs = await ask(t, "POST", `${t.other.base}/runs`, {
    as: "outsider",
    body: { kind: "script", source: "echo x\n", filename: "x.sh" },
  });
  assert.equal(theirs.status, 201, theirs.text);
  const hidden = await dispatchJob(t, (theirs.body as { id: string }).id);
  const hiddenClaim = await ask(t, "POST", "/agent/v1/claim", { as: { token: hidden.token }, body: { agent_id: "agt-other" } });
  assert.equal(hiddenClaim.status, 200, hiddenClaim.text);

  const res = await ask(t, "GET", "/api/v1/agents", { as: "viewer" });
  assert.equal(res.status, 200, res.text);
  const agents = res.body as AgentInfo[];
  const byRun = (runId: string) => agents.find((a) => a.run_id === runId);
  const project = `${t.project.org}/p`;
  assert.deepEqual(
    { ...byRun(claimed.runId), last_seen: "-" },
    {
      id: "agt-claimer",
      where: "remote",
      pid: null,
      capabilities: [],
      status: "busy",
      job_id: claimed.jobId,
      run_id: claimed.runId,
      project,
      last_seen: "-",
    },
  );
  assert.deepEqual([byRun(waiting.runId)?.id, byRun(waiting.runId)?.status], [null, "starting"]);
  const other = agents.find((a) => a.id === "agt-other");
  assert.deepEqual(
    [other?.status, other?.run_id, other?.job_id, other?.project],
    ["busy", null, null, null],
    "another project's run is not shown",
  );
  assert.ok(!res.text.includes(hidden.runId) && !res.text.includes(t.other.org));
  assert.equal(agents.length, 3);
  assert.ok(agents.every((a) => a.last_seen !== null && Date.parse(a.last_seen) <= Date.now()));

  // Its member sees it.
  const theirView = (await ask(t, "GET", "/api/v1/agents", { as: "outsider" })).body as AgentInfo[];
  assert.equal(theirView.find((a) => a.id === "agt-other")?.run_id, hidden.runId);
});

test("local agent processes are listed whether idle or busy, a busy one with its job's row", () => {
  const now = new Date("2026-11-26T12:00:00Z");
  const row = (job_id: string, visible: boolean): AgentJobRow => ({
    job_id,
    run_id: `run-of-${job_id}`,
    kind: "run",
    status: "running",
    agent_id: `agt-${job_id}`,
    capabilities: ["polyglot"],
    last_seen: new Date("2026-11-26T11:59:58Z"),
    org: "acme",
    project: "web",
    visible,
  });
  const agents = describeAgents(
    [
      { id: "local-10", pid: 10, capabilities: ["polyglot"], status: "idle" },
      { id: "local-11", pid: 11, capabilities: ["polyglot"], status: "busy", jobId: "job-a" },
      { id: "local-12", pid: 12, capabilities: ["gpu"], status: "busy", jobId: "job-b" },
    ],
    [row("job-a", true), row("job-b", false), row("job-pod", true)],
    now,
  );
  assert.deepEqual(
    agents.map((a) => [a.id, a.where, a.status, a.run_id, a.last_seen]),
    [
      ["local-10", "local", "idle", null, now.toISOString()],
      ["local-11", "local", "busy", "run-of-job-a", "2026-11-26T11:59:58.000Z"],
      ["local-12", "local", "busy", null, "2026-11-26T11:59:58.000Z"],
      ["agt-job-pod", "remote", "busy", "run-of-job-pod", "2026-11-26T11:59:58.000Z"],
    ],
  );
});
