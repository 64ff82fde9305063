/** The secrets plugin (routes/secrets.ts) over app.inject(): write-only values, admin to set and remove. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ask, assertCallerRefusals, assertError, countRows, createTestApp, deepJson, type TestApp } from "../testing/test-app.js";

let t: TestApp;
let secrets: string;
before(async () => {
  t = await createTestApp();
  secrets = `${t.project.base}/secrets`;
});
after(() => t.close());

const VALUE = "s3cr3t-value-that-must-not-leak";

const refusedSet = async (name: string, body: unknown, message: RegExp): Promise<void> => {
  const before = await countRows(t, "secrets");
  const res = await ask(t, "PUT", `${secrets}/${name}`, { as: "admin", body });
  assertError(res, 400, message, `set ${name}`);
  assert.ok(!res.text.includes(VALUE), "a refusal never quotes the value");
  assert.equal(await countRows(t, "secrets"), before, "a refused set wrote nothing");
};

test("an admin sets a secret; viewers see its name and time, never its value; an admin removes it", async () => {
  const set = await ask(t, "PUT", `${secrets}/API_KEY`, { as: "admin", body: { value: VALUE } });
  assert.equal(set.status, 200, set.text);
  assert.equal((set.body as { name: string }).name, "API_KEY");
  const list = await ask(t, "GET", secrets, { as: "viewer" });
  assert.deepEqual(
    (list.body as Array<{ name: string }>).map((s) => s.name),
    ["API_KEY"],
  );
  const show = await ask(t, "GET", `${secrets}/API_KEY`, { as: "viewer" });
  assert.equal(show.status, 200);
  assert.deepEqual(Object.keys(show.body as object).sort(), ["exists", "name", "set_at"]);
  for (const res of [set, list, show]) assert.ok(!res.text.includes(VALUE), "no answer carries the value");
  const { rows } = await t.db.pool.query<{ sealed: Buffer }>(`select sealed from secrets where name = 'API_KEY'`);
  assert.ok(!rows[0]!.sealed.toString("latin1").includes(VALUE), "the value is stored sealed");
  const del = await ask(t, "DELETE", `${secrets}/API_KEY`, { as: "admin" });
  assert.equal(del.status, 204);
  assertError(await ask(t, "GET", `${secrets}/API_KEY`, { as: "viewer" }), 404, /secret API_KEY is not set in/);
  assertError(await ask(t, "DELETE", `${secrets}/API_KEY`, { as: "admin" }), 404, /secret API_KEY is not set in/);
});

test("secret routes refuse callers: no token, a forged token, a role below, a non-member", async () => {
  await t.app.inject({
    method: "PUT",
    url: `${secrets}/KEPT`,
    headers: { authorization: `Bearer ${t.tokens.admin}` },
    payload: { value: "v" },
  });
  await assertCallerRefusals(t, { method: "GET", url: secrets }, "viewer");
  await assertCallerRefusals(t, { method: "GET", url: `${secrets}/KEPT` }, "viewer");
  await assertCallerRefusals(t, { method: "PUT", url: `${secrets}/OTHER`, body: { value: VALUE } }, "admin");
  await assertCallerRefusals(t, { method: "DELETE", url: `${secrets}/KEPT` }, "admin");
  assert.equal((await ask(t, "GET", `${secrets}/KEPT`, { as: "viewer" })).status, 200, "the refused delete removed nothing");
  assertError(
    await ask(t, "GET", `${t.other.base}/secrets/KEPT`, { as: "outsider" }),
    404,
    new RegExp(`secret KEPT is not set in ${t.other.org}/p`),
  );
});

test("a bad name or body is a 400 that names what is wrong and never quotes the value", async () => {
  await refusedSet("1ABC", { value: VALUE }, /secret name "1ABC" is not an environment variable name/);
  await refusedSet("LD_PRELOAD", { value: VALUE }, /secret name "LD_PRELOAD" is refused: /);
  await refusedSet("BASH_FUNC_x%25%25", { value: VALUE }, /secret name "BASH_FUNC_x%%" is refused: /);
  await refusedSet("OK", { value: 42 }, /^value: the value must be a JSON string/);
  await refusedSet("OK", { value: VALUE, extra: 1 }, /extra/);
  await refusedSet("OK", {}, /^value: /);
  await refusedSet("OK", { value: "" }, /^secret OK: the value is empty/);
});

test("hostile secrets: NUL and lone surrogates in the value or the name, deep nesting, a huge value", async () => {
  await refusedSet("OK", { value: `${VALUE}\u0000` }, /^body\.value holds a NUL character/);
  await refusedSet("OK", { value: `${VALUE}\ud800` }, /^body\.value holds a lone UTF-16 surrogate/);
  await refusedSet("OK", `{"value":${deepJson(200)}}`, /is nested more than 128 levels deep/);
  await refusedSet("A%00B", { value: VALUE }, /path parameter name holds a NUL character/);
  await refusedSet("A%ED%B0%80", { value: VALUE }, /not valid percent-encoding/);
  await refusedSet("OK", { value: VALUE.repeat(1 + (70 * 1024) / VALUE.length) }, /^secret OK: /);
  assertError(await ask(t, "GET", `${secrets}/%00`, { as: "viewer" }), 400, /path parameter name holds a NUL character/);
  assertError(await ask(t, "DELETE", `${secrets}/A-B`, { as: "admin" }), 400, /is not an environment variable name/);
});
