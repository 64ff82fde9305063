/** The runs plugin (routes/runs.ts) over app.inject(): submit, list, show, steps, log, and their refusals. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ask, assertCallerRefusals, assertError, countRows, createTestApp, deepJson, type TestApp } from "../testing/test-app.js";

let t: TestApp;
let runs: string;
before(async () => {
  t = await createTestApp();
  runs = `${t.project.base}/runs`;
});
after(() => t.close());

const script = { kind: "script", source: "echo hi\n", filename: "hi.sh" };

/** POST a submit that must be refused with `status` and `message`, and leave no run or job behind. */
const refusedSubmit = async (body: unknown, status: number, message: RegExp): Promise<void> => {
  const before = [await countRows(t, "runs"), await countRows(t, "jobs")];
  assertError(
    await ask(t, "POST", runs, { body }),
    status,
    message,
    `submit ${typeof body === "string" ? body.slice(0, 80) : JSON.stringify(body).slice(0, 80)}`,
  );
  assert.deepEqual([await countRows(t, "runs"), await countRows(t, "jobs")], before, "a refused submit wrote nothing");
};

test("a member submits a script: 201 with the queued run, shown to a viewer, and a manual event on the bus", async () => {
  const res = await ask(t, "POST", runs, { body: { ...script, tags: ["a"], env: { GREETING: "hi" } } });
  assert.equal(res.status, 201, res.text);
  const run = res.body as { id: string; status: string; filename: string; tags: string[]; trigger: { type: string; sender: string } };
  assert.equal(run.status, "queued");
  assert.deepEqual([run.filename, run.tags, run.trigger], ["hi.sh", ["a"], { type: "manual", sender: "mo" }]);
  const shown = await ask(t, "GET", `${runs}/${run.id}`, { as: "viewer" });
  assert.equal(shown.status, 200);
  assert.equal((shown.body as { id: string }).id, run.id);
  const listed = await ask(t, "GET", `${runs}?tag=a`, { as: "viewer" });
  assert.deepEqual(
    (listed.body as Array<{ id: string }>).map((r) => r.id),
    [run.id],
  );
  const { rows } = await t.db.pool.query<{ type: string }>(`select type from events where payload->>'run_id' = $1`, [run.id]);
  assert.deepEqual(
    rows.map((r) => r.type),
    ["manual"],
  );
});

test("a submit with an idempotency key answers the first run again, with 200", async () => {
  const first = await ask(t, "POST", runs, { body: { ...script, idempotency_key: "once" } });
  const again = await ask(t, "POST", runs, { body: { ...script, idempotency_key: "once" } });
  assert.equal(first.status, 201);
  assert.deepEqual([again.status, again.body], [200, { id: (first.body as { id: string }).id, duplicate: true }]);
});

test("submit refuses callers: no token, a forged token, a viewer, a non-member", async () => {
  const before = await countRows(t, "runs");
  await assertCallerRefusals(t, { method: "POST", url: runs, body: script }, "member");
  assert.equal(await countRows(t, "runs"), before);
});

test("the read routes refuse callers: no token, a forged token, a non-member", async () => {
  const id = ((await ask(t, "POST", runs, { body: script })).body as { id: string }).id;
  for (const url of [runs, `${runs}/${id}`, `${runs}/${id}/steps`, `${runs}/${id}/log`]) {
    await assertCallerRefusals(t, { method: "GET", url }, "viewer");
  }
});

test("another project's run is not found, for every run route", async () => {
  const id = ((await ask(t, "POST", runs, { body: script })).body as { id: string }).id;
  for (const url of [`${t.other.base}/runs/${id}`, `${t.other.base}/runs/${id}/steps`, `${t.other.base}/runs/${id}/log`]) {
    assertError(await ask(t, "GET", url, { as: "outsider" }), 404, new RegExp(`run ${id} not found in ${t.other.org}/p`), url);
  }
  assert.deepEqual((await ask(t, "GET", `${t.other.base}/runs`, { as: "outsider" })).body, []);
});

test("a bad submit body is a 400 naming the field", async () => {
  await refusedSubmit(
    { ...script, kind: "pipeline" },
    400,
    /^kind: a script run takes kind "script"; a graph or pipeline is sent without kind, with "as"/,
  );
  await refusedSubmit({ source: "x", filename: "a.sh" }, 400, /^kind: a script run takes kind "script"/);
  await refusedSubmit({ ...script, filename: "../x.sh" }, 400, /^filename: filename must be a base name/);
  await refusedSubmit({ ...script, source: 1 }, 400, /^source: /);
  await refusedSubmit({ ...script, env: { "1BAD": "x" } }, 400, /^env\.1BAD: env variable "1BAD" is not an environment variable name/);
  await refusedSubmit({ ...script, surprise: true }, 400, /surprise/);
  await refusedSubmit({ ...script, retry: { attempts: 0 } }, 400, /^retry\.attempts: /);
  await refusedSubmit('{"kind":', 400, /JSON/);
  await refusedSubmit("", 400, /body/i);
});

test("env names that hijack a process, or are no name at all, are refused by core's one rule, and nothing is written", async () => {
  const reserved: Array<[string, RegExp]> = [
    ["FLOW_TOKEN", /^env\.FLOW_TOKEN: env variable "FLOW_TOKEN" is refused: FLOW_\* variables are reserved/],
    ["FLOW_RUN_ID", /^env\.FLOW_RUN_ID: env variable "FLOW_RUN_ID" is refused/],
    ["LD_PRELOAD", /^env\.LD_PRELOAD: env variable "LD_PRELOAD" is refused: the dynamic loader/],
    ["LD_AUDIT", /^env\.LD_AUDIT: env variable "LD_AUDIT" is refused: the dynamic loader/],
    ["BASH_ENV", /^env\.BASH_ENV: env variable "BASH_ENV" is refused: a shell reads it/],
    ["PATH", /^env\.PATH: env variable "PATH" is refused: it decides which programs run/],
    ["A=B", /^env\."A=B": env variable "A=B" is not an environment variable name/],
    ["", /^env\."": an env variable is empty/],
    ["X".repeat(10_000), /^env\."X{64}\.\.\.": an env variable is at most 100 characters; this one has 10000$/],
  ];
  for (const [name, message] of reserved) await refusedSubmit({ ...script, env: { OK: "1", [name]: "x" } }, 400, message);
  // NUL and a lone surrogate are refused by the body's storability guard, before the schema, naming where.
  await refusedSubmit({ ...script, env: { "LD\u0000PRELOAD": "x" } }, 400, /^body\.env\["LD\\u0000PRELOAD"\] has a key that holds a NUL/);
  await refusedSubmit({ ...script, env: { "A\ud800": "x" } }, 400, /^body\.env\["A\\ud800"\] has a key that holds a lone UTF-16 surrogate/);
});

test("hostile submit bodies: NUL, lone surrogates, deep nesting, huge numbers, all refused with where", async () => {
  await refusedSubmit({ ...script, source: "echo \u0000" }, 400, /^body\.source holds a NUL character/);
  await refusedSubmit({ ...script, env: { A: "\ud800" } }, 400, /^body\.env\.A holds a lone UTF-16 surrogate/);
  await refusedSubmit({ ...script, tags: ["\udc00x"] }, 400, /^body\.tags\[0\] holds a lone UTF-16 surrogate/);
  await refusedSubmit({ ...script, env: { "A\u0000": "x" } }, 400, /^body\.env\["A\\u0000"\] has a key that holds a NUL/);
  await refusedSubmit(
    `{"kind":"script","source":"x","filename":"a.sh","env":${deepJson(200)}}`,
    400,
    /is nested more than 128 levels deep/,
  );
  await refusedSubmit({ ...script, retry: { attempts: 1e308 } }, 400, /^retry\.attempts: /);
  await refusedSubmit(
    `{"kind":"script","source":"x","filename":"a.sh","retry":{"attempts":1e999}}`,
    400,
    /^body\.retry\.attempts is a number outside the range a JSON number can be stored in/,
  );
  await refusedSubmit({ ...script, retry: { attempts: 2, backoff_ms: Number.MAX_SAFE_INTEGER + 2 } }, 400, /^retry\.backoff_ms: /);
});

test("hostile path parameters and queries: percent-encoded NUL, broken encoding, an overlong id, a huge limit", async () => {
  assertError(await ask(t, "GET", `${runs}/%00`, { as: "viewer" }), 400, /path parameter id holds a NUL character/);
  assertError(await ask(t, "GET", `${runs}/%ED%A0%80`, { as: "viewer" }), 400, /not valid percent-encoding/);
  assertError(await ask(t, "GET", `${runs}/%E0%A4%A`, { as: "viewer" }), 400, /not valid percent-encoding/);
  assertError(await ask(t, "GET", `${runs}/${"r".repeat(65)}`, { as: "viewer" }), 400, /^id: /);
  assertError(await ask(t, "GET", `${runs}?limit=1e400`, { as: "viewer" }), 400, /^limit: /);
  assertError(await ask(t, "GET", `${runs}?limit=99999999999999999999`, { as: "viewer" }), 400, /^limit: /);
  assertError(await ask(t, "GET", `${runs}?tag=%00`, { as: "viewer" }), 400, /query parameter "tag" holds a NUL character/);
  assertError(await ask(t, "GET", `${runs}?status=exploded`, { as: "viewer" }), 400, /^status: /);
  assertError(await ask(t, "GET", `/api/v1/orgs/${t.project.org}/projects/%F0%9F`, { as: "viewer" }), 400, /not valid percent-encoding/);
});

test("steps and log of a fresh run: an empty journal, an empty log", async () => {
  const id = ((await ask(t, "POST", runs, { body: script })).body as { id: string }).id;
  const steps = await ask(t, "GET", `${runs}/${id}/steps`, { as: "viewer" });
  assert.deepEqual([steps.status, steps.body], [200, []]);
  const log = await ask(t, "GET", `${runs}/${id}/log`, { as: "viewer" });
  assert.equal(log.status, 200);
  assert.equal(log.res.headers["content-type"], "text/plain; charset=utf-8");
  assert.equal(log.text, "");
  assertError(await ask(t, "GET", `${runs}/${id}/log?follow=maybe`, { as: "viewer" }), 400, /^follow: /);
});

test("an unknown route under the API is the one not-found shape", async () => {
  const res = await ask(t, "GET", `${runs}/x/nothing-here`, { as: "viewer" });
  assertError(res, 404, /^no route GET \/api\/v1\/orgs\/.+\/runs\/x\/nothing-here$/);
  assert.equal(res.error?.code, "not_found");
});
