/** The signals plugin (routes/signals.ts) over app.inject(): signal, cancel and rerun a run, and their refusals. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  ask,
  assertCallerRefusals,
  assertError,
  countRows,
  createTestApp,
  deepJson,
  startScriptJob,
  type TestApp,
} from "../testing/test-app.js";

let t: TestApp;
let runs: string;
before(async () => {
  t = await createTestApp();
  runs = `${t.project.base}/runs`;
});
after(() => t.close());

const agent = (path: string, token: string, body: unknown) => ask(t, "POST", `/agent/v1/${path}`, { as: { token }, body });

/** A queued run of the project (its job is never dispatched). */
const queuedRun = async (): Promise<string> =>
  ((await ask(t, "POST", runs, { body: { kind: "script", source: "true\n", filename: "q.sh" } })).body as { id: string }).id;

test("rerun from a recorded step: 201 with the new run; an unknown site is a 404, a malformed one a 400", async () => {
  const job = await startScriptJob(t);
  await agent("claim", job.token, { agent_id: "a" });
  await agent("journal", job.token, { position: 0, kind: "step", name: "build", ordinal: 0, result: { stdout_b64: "", exit: 0 } });
  await agent("finish", job.token, { exit_code: 0, duration_ms: 1 });
  const rerun = await ask(t, "POST", `${runs}/${job.runId}/rerun`, { body: { from: "build" } });
  assert.equal(rerun.status, 201, rerun.text);
  const view = rerun.body as { id: string; rerun_of: string; status: string };
  assert.deepEqual([view.rerun_of, view.status], [job.runId, "queued"]);
  assertError(
    await ask(t, "POST", `${runs}/${job.runId}/rerun`, { body: { from: "deploy" } }),
    404,
    new RegExp(`run ${job.runId} has no recorded step deploy#0`),
  );
  assertError(await ask(t, "POST", `${runs}/${job.runId}/rerun`, { body: {} }), 400, /^from: /);
  assertError(await ask(t, "POST", `${runs}/${job.runId}/rerun`, { body: { from: "build#99999999999999999999" } }), 400, /build/);
  assert.equal((await ask(t, "POST", `${runs}/${view.id}/cancel`, { body: {} })).status, 200);
});

test("a member signals a run: 202, the signal is stored for the run", async () => {
  const id = await queuedRun();
  const res = await ask(t, "POST", `${runs}/${id}/signals/approve`, { body: { payload: { ok: true } } });
  assert.equal(res.status, 202, res.text);
  assert.deepEqual(res.body, { run_id: id, name: "approve", delivered: false });
  const { rows } = await t.db.pool.query<{ name: string; payload: unknown }>(`select name, payload from signals where run_id = $1`, [id]);
  assert.deepEqual(rows, [{ name: "approve", payload: { ok: true } }]);
});

test("a member cancels a run: the run view, cancelled with the reason", async () => {
  const id = await queuedRun();
  const res = await ask(t, "POST", `${runs}/${id}/cancel`, { body: { reason: "not today" } });
  assert.equal(res.status, 200, res.text);
  const view = res.body as { status: string; error: string };
  assert.deepEqual([view.status, view.error], ["cancelled", "not today"]);
  const byDefault = await ask(t, "POST", `${runs}/${await queuedRun()}/cancel`, { as: "admin" });
  assert.equal((byDefault.body as { error: string }).error, "cancelled by ada");
});

/** The run's status and error, and its run.cancelled event's reason (undefined: no event). */
const cancelled = async (id: string): Promise<{ status: string; error: string | null; reason: string | undefined }> => {
  const { rows } = await t.db.pool.query<{ status: string; error: string | null; reason: string | undefined }>(
    `select r.status, r.error, (select e.payload->>'reason' from events e where e.type = 'run.cancelled' and e.payload->>'run_id' = r.id) as reason
       from runs r where r.id = $1`,
    [id],
  );
  return { ...rows[0]!, reason: rows[0]?.reason ?? undefined };
};

test("a long cancel reason is taken and cut to its last 4000 characters, on a code point boundary, in the run and its event", async () => {
  const emoji = "\u{1F600}";
  for (const [reason, tail] of [
    [`${"a".repeat(1)}${"z".repeat(4000)}`, "z".repeat(4000)],
    [`${"a".repeat(6000)}the real cause${"z".repeat(3986)}`, `the real cause${"z".repeat(3986)}`],
    [`${emoji.repeat(5000)}x`, `${emoji.repeat(1999)}x`],
  ] as const) {
    const id = await queuedRun();
    const res = await ask(t, "POST", `${runs}/${id}/cancel`, { body: { reason } });
    assert.equal(res.status, 200, res.text.slice(0, 300));
    assert.equal((res.body as { error: string }).error, tail);
    assert.deepEqual(await cancelled(id), { status: "cancelled", error: tail, reason: tail });
  }
});

test("a cancel reason over 64 Ki characters, with a NUL or a lone surrogate is refused, naming the field, and the run goes on", async () => {
  const id = await queuedRun();
  const refusals: Array<[string, RegExp]> = [
    ["x".repeat(65_537), /^reason: is longer than 65536 characters, the most a cancel reason may be; run\.cancelled keeps its last 4000$/],
    ["x".repeat(70_000), /^reason: is longer than 65536 characters/],
    ["stop\0now", /^body\.reason holds a NUL character/],
    ["half \ud83d of an emoji", /^body\.reason holds a lone UTF-16 surrogate/],
  ];
  for (const [reason, message] of refusals) assertError(await ask(t, "POST", `${runs}/${id}/cancel`, { body: { reason } }), 400, message);
  assert.deepEqual(await cancelled(id), { status: "queued", error: null, reason: undefined });
  const atLimit = await ask(t, "POST", `${runs}/${id}/cancel`, { body: { reason: `${"x".repeat(65_535)}!` } });
  assert.equal(atLimit.status, 200, atLimit.text.slice(0, 300));
  assert.deepEqual(await cancelled(id), { status: "cancelled", error: `${"x".repeat(3999)}!`, reason: `${"x".repeat(3999)}!` });
});

test("signal, cancel and rerun refuse callers: no token, a forged token, a viewer, a non-member", async () => {
  const id = await queuedRun();
  const signals = await countRows(t, "signals");
  await assertCallerRefusals(t, { method: "POST", url: `${runs}/${id}/signals/go`, body: {} }, "member");
  await assertCallerRefusals(t, { method: "POST", url: `${runs}/${id}/cancel`, body: {} }, "member");
  await assertCallerRefusals(t, { method: "POST", url: `${runs}/${id}/rerun`, body: { from: "build" } }, "member");
  assert.equal(await countRows(t, "signals"), signals);
  assert.equal(
    ((await ask(t, "GET", `${runs}/${id}`, { as: "viewer" })).body as { status: string }).status,
    "queued",
    "the refused cancels changed nothing",
  );
  await ask(t, "POST", `${runs}/${id}/cancel`, { body: {} });
});

test("another project's run is not found by its routes", async () => {
  const id = await queuedRun();
  const other = `${t.other.base}/runs/${id}`;
  assertError(
    await ask(t, "POST", `${other}/signals/go`, { as: "outsider", body: {} }),
    404,
    new RegExp(`run ${id} not found in ${t.other.org}/p`),
  );
  assertError(
    await ask(t, "POST", `${other}/cancel`, { as: "outsider", body: {} }),
    404,
    new RegExp(`run ${id} not found in ${t.other.org}/p`),
  );
  assertError(await ask(t, "POST", `${other}/rerun`, { as: "outsider", body: { from: "build" } }), 404, new RegExp(`run ${id} not found`));
  assert.equal(((await ask(t, "GET", `${runs}/${id}`, { as: "viewer" })).body as { status: string }).status, "queued");
  await ask(t, "POST", `${runs}/${id}/cancel`, { body: {} });
});

test("bad and hostile signals: a reserved name, NUL and surrogates, deep payloads, bad bodies, all 400 with where", async () => {
  const id = await queuedRun();
  const before = await countRows(t, "signals");
  const signal = (name: string, body: unknown) => ask(t, "POST", `${runs}/${id}/signals/${name}`, { body });
  assertError(await signal("event:push", {}), 400, /^name: signal names starting event: are reserved for event waits/);
  assertError(await signal("event%3Apush", {}), 400, /^name: signal names starting event: are reserved/);
  assertError(await signal("go%00", {}), 400, /^path parameter name holds a NUL character/);
  assertError(await signal("go%ED%A0%80", {}), 400, /not valid percent-encoding/);
  assertError(await signal("go", { payload: "\ud800" }), 400, /^body\.payload holds a lone UTF-16 surrogate/);
  assertError(await signal("go", { payload: { "k\u0000": 1 } }), 400, /^body\.payload\["k\\u0000"\] has a key that holds a NUL/);
  assertError(await signal("go", `{"payload":${deepJson(200)}}`), 400, /^body\.payload.* is nested more than 128 levels deep/);
  assertError(await signal("go", { payload: 1, extra: 2 }), 400, /extra/);
  assertError(await signal("go", [1, 2]), 400, /expected object/);
  assertError(
    await ask(t, "POST", `${runs}/${id}/cancel`, { body: `{"reason":1e400}` }),
    400,
    /^body\.reason is a number outside the range a JSON number can be stored in/,
  );
  assertError(await ask(t, "POST", `${runs}/${id}/cancel`, { body: { reason: "x".repeat(65_537) } }), 400, /^reason: /);
  assert.equal(await countRows(t, "signals"), before, "no refused signal was stored");
  await ask(t, "POST", `${runs}/${id}/cancel`, { body: {} });
});
