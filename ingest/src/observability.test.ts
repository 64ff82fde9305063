/**
 * `GET /metrics` (observability.ts, store/src/metrics.ts) over app.inject(): after a few requests
 * the scrape counts them by route template, times the agent's claim and step records, counts hook
 * deliveries and refusals by reason, reads runs and the queue from Postgres, and never turns what
 * a caller sent (a hook's name, a URL, a header) into a label value.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ask, createTestApp, startScriptJob, type TestApp } from "./testing/test-app.js";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(() => t.close());

/** `name{labels} value` lines of a scrape, as a map from the series to its value. */
const series = (text: string): Map<string, number> => {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
};

const scrape = async (): Promise<{ text: string; values: Map<string, number> }> => {
  const res = await ask(t, "GET", "/metrics", { as: "none" });
  assert.equal(res.status, 200, res.text);
  assert.match(String(res.res.headers["content-type"]), /^text\/plain; version=0\.0\.4/);
  return { text: res.text, values: series(res.text) };
};

/** Every label value of a scrape: `{a="x",b="y"}` gives x and y. */
const labelValues = (text: string): string[] => [...text.matchAll(/="((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!);

const HOSTILE = "evil%0d%0aflowsvc_fake_total%201";

test("a scrape counts requests by route, times claims and steps, and reads runs and the queue from Postgres", async () => {
  const job = await startScriptJob(t, "echo hi\n"); // one run submitted (and its job dispatched)
  await startScriptJob(t, "echo two\n");
  const queued = await ask(t, "POST", `${t.project.base}/runs`, { body: { kind: "script", source: "echo 3\n", filename: "a.sh" } });
  assert.equal(queued.status, 201, queued.text);
  const claim = await ask(t, "POST", "/agent/v1/claim", { as: { token: job.token }, body: { agent_id: "agent-1" } });
  assert.equal(claim.status, 200, claim.text);
  const stepBody = { position: 0, kind: "step", name: "build", ordinal: 0, result: { stdout_b64: "aGk=", exit: 0 } };
  assert.equal((await ask(t, "POST", "/agent/v1/journal", { as: { token: job.token }, body: stepBody })).status, 200);
  for (let i = 0; i < 3; i++) assert.equal((await ask(t, "GET", "/api/v1/whoami")).status, 200);
  assert.equal((await ask(t, "GET", `/no/such/${HOSTILE}`)).status, 404);

  const { values } = await scrape();
  assert.equal(values.get('flowsvc_http_requests_total{method="GET",route="/api/v1/whoami",status="200"}'), 3);
  assert.equal(values.get('flowsvc_http_requests_total{method="POST",route="/api/v1/orgs/:org/projects/:project/runs",status="201"}'), 3);
  assert.equal(values.get('flowsvc_http_requests_total{method="GET",route="unmatched",status="404"}'), 1);
  assert.equal(values.get("flowsvc_job_claim_duration_seconds_count"), 1);
  assert.equal(values.get("flowsvc_step_record_duration_seconds_count"), 1);
  // Runs from Postgres: one running (claimed), two queued (one dispatched but not yet claimed, one waiting).
  assert.equal(values.get('flowsvc_runs{status="running",trigger="other"}'), 1);
  assert.equal(values.get('flowsvc_runs{status="queued",trigger="other"}'), 2);
  assert.equal(values.get('flowsvc_runs{status="failed",trigger="handler"}'), 0, "every status is reported, 0 when none");
  assert.equal(values.get("flowsvc_queue_depth"), 1);
  assert.ok((values.get("flowsvc_queue_oldest_age_seconds") ?? -1) >= 0);
  assert.ok((values.get('flowsvc_postgres_pool_connections{state="total"}') ?? 0) >= 1);
  assert.ok(values.has("process_resident_memory_bytes"), "process metrics are there");
});

test("hook deliveries and refusals are counted by reason, and a hostile hook name or URL is never a label value", async () => {
  const made = await ask(t, "PUT", `${t.project.base}/event-hooks/ci`, { as: "admin", body: { event_type: "ci.done" } });
  assert.equal(made.status, 201, made.text);
  const secret = (made.body as { secret: string }).secret;
  const deliver = (name: string, headers: Record<string, string>) =>
    ask(t, "POST", `/api/v1/hooks/${t.project.org}/p/${name}`, {
      as: "none",
      body: "{}",
      headers: { "content-type": "application/json", ...headers },
    });
  assert.equal((await deliver("ci", { "x-flow-hook-secret": secret })).status, 202);
  assert.equal((await deliver("ci", {})).status, 401);
  assert.equal((await deliver("ci", { "x-flow-hook-secret": "wrong" })).status, 401);
  assert.equal((await deliver("ci", { "x-flow-hook-secret": "wrong\u0000" })).status, 401);
  assert.equal((await deliver(HOSTILE, { "x-flow-hook-secret": secret })).status, 404);
  const big = await ask(t, "POST", `/api/v1/hooks/${t.project.org}/p/ci`, {
    as: "none",
    body: "x".repeat(3 * 1024 * 1024),
    headers: { "content-type": "text/plain", "x-flow-hook-secret": secret },
  });
  assert.equal(big.status, 413);

  const { text, values } = await scrape();
  assert.equal(values.get('flowsvc_hook_deliveries_total{outcome="recorded"}'), 1);
  assert.equal(values.get('flowsvc_hook_refusals_total{reason="no_secret"}'), 1);
  assert.equal(values.get('flowsvc_hook_refusals_total{reason="wrong_secret"}'), 2);
  assert.equal(values.get('flowsvc_hook_refusals_total{reason="not_found"}'), 1);
  assert.equal(values.get('flowsvc_hook_refusals_total{reason="payload_too_large"}'), 1);
  const labels = labelValues(text);
  for (const v of labels) {
    assert.ok(!/evil|no\/such|flowsvc_fake|%0d/i.test(v), `a caller's input became a label value: ${v}`);
    assert.ok(v.length <= 80, `a label value is unbounded: ${v}`);
  }
  assert.ok(!text.includes("flowsvc_fake_total"), "a URL cannot inject a series");
  assert.ok(!text.includes(secret), "no secret in the scrape");
});
