/** The emit and events plugins (routes/emit.ts, routes/events.ts) over app.inject(): emit, list, catalog, show. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ask, assertCallerRefusals, assertError, countRows, createTestApp, deepJson, type TestApp } from "../testing/test-app.js";

let t: TestApp;
let events: string;
before(async () => {
  t = await createTestApp();
  events = `${t.project.base}/events`;
});
after(() => t.close());

const refusedEmit = async (body: unknown, message: RegExp, status = 400): Promise<void> => {
  const before = await countRows(t, "events");
  assertError(
    await ask(t, "POST", events, { body }),
    status,
    message,
    `emit ${typeof body === "string" ? body.slice(0, 60) : JSON.stringify(body).slice(0, 60)}`,
  );
  assert.equal(await countRows(t, "events"), before, "a refused emit recorded nothing");
};

test("a member emits an event: 201 with its id; viewers list it, filter it, show it and see its type in the catalog", async () => {
  const res = await ask(t, "POST", events, { body: { type: "deploy.requested", key: "acme/web", payload: { sha: "abc" } } });
  assert.equal(res.status, 201, res.text);
  const { id, type, handler_runs } = res.body as { id: string; type: string; handler_runs: unknown[] };
  assert.deepEqual([type, handler_runs], ["deploy.requested", []]);
  const listed = await ask(t, "GET", `${events}?type=deploy.requested&key=acme%2Fweb&since=1h`, { as: "viewer" });
  assert.deepEqual(
    (listed.body as Array<{ id: string }>).map((e) => e.id),
    [id],
  );
  assert.deepEqual((await ask(t, "GET", `${events}?since=2000-01-01T00:00:00Z&type=other`, { as: "viewer" })).body, []);
  const shown = await ask(t, "GET", `${events}/${id}`, { as: "viewer" });
  assert.equal(shown.status, 200);
  assert.deepEqual((shown.body as { payload: unknown }).payload, { sha: "abc" });
  const catalog = (await ask(t, "GET", `${events}/catalog`, { as: "viewer" })).body as {
    platform: Array<{ type: string }>;
    seen: Array<{ type: string }>;
    seen_truncated: boolean;
  };
  assert.ok(catalog.platform.some((p) => p.type === "manual"));
  assert.deepEqual(
    catalog.seen.map((s) => s.type),
    ["deploy.requested"],
  );
  assert.equal(catalog.seen_truncated, false);
});

test("emit and the event reads refuse callers: no token, a forged token, a viewer emitting, a non-member", async () => {
  const id = ((await ask(t, "POST", events, { body: { type: "x.y" } })).body as { id: string }).id;
  const before = await countRows(t, "events");
  await assertCallerRefusals(t, { method: "POST", url: events, body: { type: "a.b" } }, "member");
  assert.equal(await countRows(t, "events"), before);
  for (const url of [events, `${events}/catalog`, `${events}/${id}`]) await assertCallerRefusals(t, { method: "GET", url }, "viewer");
  assertError(
    await ask(t, "GET", `${t.other.base}/events/${id}`, { as: "outsider" }),
    404,
    new RegExp(`event ${id} not found in ${t.other.org}/p`),
  );
  assert.deepEqual((await ask(t, "GET", `${t.other.base}/events`, { as: "outsider" })).body, []);
});

test("a bad emit is a 400 naming the field: a reserved or malformed type, an empty or long key, unknown fields", async () => {
  await refusedEmit({ type: "run.failed" }, /^type: event type "run\.failed" is reserved for the platform/);
  await refusedEmit({ type: "Manual" }, /^type: event type "Manual" is reserved/);
  await refusedEmit({ type: "has space" }, /^type: event type "has space" must be 1-64 characters/);
  await refusedEmit({}, /^type: type is required/);
  await refusedEmit({ type: "a.b", key: "" }, /^key: key is empty; leave it out for a broadcast event/);
  await refusedEmit({ type: "a.b", key: "k".repeat(513) }, /^key: key is at most 512 characters/);
  await refusedEmit({ type: "a.b", extra: 1 }, /extra/);
});

test("hostile emits: NUL and surrogates in type, key and payload keys, deep payloads, huge numbers, a body over 2 MiB", async () => {
  await refusedEmit({ type: "a.b", key: "k\u0000" }, /^body\.key holds a NUL character/);
  await refusedEmit({ type: "a\ud800" }, /^body\.type holds a lone UTF-16 surrogate/);
  await refusedEmit(
    { type: "a.b", payload: { deep: { "\udc00": 1 } } },
    /^body\.payload\.deep\["\\udc00"\] has a key that holds a lone UTF-16 surrogate/,
  );
  await refusedEmit(`{"type":"a.b","payload":${deepJson(200)}}`, /^body\.payload.* is nested more than 128 levels deep/);
  await refusedEmit(
    { type: "a.b", payload: "x".repeat(2 * 1024 * 1024) },
    /the request body is 2 MiB; the limit for POST .* is 2 MiB/,
    413,
  );
  const rows = await countRows(t, "events");
  const big = await ask(t, "POST", events, { body: `{"type":"a.b","payload":{"n":1e400,"m":-1e400,"i":123456789012345678901234567890}}` });
  // 1e400 parses to Infinity, which JSON cannot store (it would become null): refused at its path.
  assertError(big, 400, /^body\.payload\.n is a number outside the range a JSON number can be stored in/);
  assert.equal(await countRows(t, "events"), rows, "the refused emit recorded nothing");
  const fine = await ask(t, "POST", events, { body: `{"type":"a.b","payload":{"i":123456789012345678901234567890}}` });
  assert.equal(fine.status, 201, "a big but finite number is a JSON number: stored as the value it parses to");
  assert.deepEqual(
    ((await ask(t, "GET", `${events}/${(fine.body as { id: string }).id}`, { as: "viewer" })).body as { payload: unknown }).payload,
    { i: 1.2345678901234568e29 },
  );
});

test("hostile event reads: bad since, limits and ids", async () => {
  assertError(await ask(t, "GET", `${events}?since=yesterday`, { as: "viewer" }), 400, /^since: "yesterday" is neither a duration/);
  assertError(await ask(t, "GET", `${events}?since=99999999999999999999d`, { as: "viewer" }), 400, /since/);
  assertError(await ask(t, "GET", `${events}?limit=0`, { as: "viewer" }), 400, /^limit: /);
  assertError(await ask(t, "GET", `${events}?limit=1e999`, { as: "viewer" }), 400, /^limit: /);
  assertError(await ask(t, "GET", `${events}?type=%00`, { as: "viewer" }), 400, /query parameter "type" holds a NUL character/);
  assertError(await ask(t, "GET", `${events}/%00`, { as: "viewer" }), 400, /path parameter id holds a NUL character/);
  assertError(await ask(t, "GET", `${events}/evt_missing`, { as: "viewer" }), 404, /event evt_missing not found in/);
});

test("an emit answers the handlers that matched but declined it, with why (the CLI prints them)", async () => {
  const handler = {
    on: ["dec.go"],
    when: "event.payload.n > 1",
    reaction: { kind: "script", source: "echo go\n", filename: "go.sh" },
  };
  assert.equal((await ask(t, "PUT", `${t.project.base}/handlers/dec`, { body: handler })).status, 201);
  const res = await ask(t, "POST", events, { body: { type: "dec.go", payload: { n: "not a number" } } });
  assert.equal(res.status, 201, res.text);
  const body = res.body as { handler_runs: unknown[]; declined: Array<{ handler: string; error: string }> };
  assert.deepEqual(body.handler_runs, []);
  assert.deepEqual(
    body.declined.map((d) => d.handler),
    ["dec"],
  );
  assert.match(body.declined[0]!.error, /./);
  const fine = await ask(t, "POST", events, { body: { type: "dec.go", payload: { n: 5 } } });
  assert.deepEqual((fine.body as { declined: unknown[] }).declined, []);
});
