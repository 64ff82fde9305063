/** The handlers plugin (routes/handlers.ts) over app.inject(): set, list, show and remove handlers, and their refusals. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ask, assertCallerRefusals, assertError, countRows, createTestApp, deepJson, type TestApp } from "../testing/test-app.js";

let t: TestApp;
let handlers: string;
before(async () => {
  t = await createTestApp();
  handlers = `${t.project.base}/handlers`;
});
after(() => t.close());

const handler = {
  on: ["deploy.*"],
  when: "event.key == 'acme/web'",
  reaction: { kind: "script", source: "echo deploy\n", filename: "deploy.sh" },
};

const refusedSet = async (name: string, body: unknown, message: RegExp): Promise<void> => {
  const before = await countRows(t, "handlers");
  assertError(
    await ask(t, "PUT", `${handlers}/${name}`, { body }),
    400,
    message,
    `set ${name} ${typeof body === "string" ? body.slice(0, 60) : JSON.stringify(body).slice(0, 60)}`,
  );
  assert.equal(await countRows(t, "handlers"), before, "a refused set wrote nothing");
};

test("a member sets a handler (201), replaces it (200); viewers list and show it; a member removes it", async () => {
  const created = await ask(t, "PUT", `${handlers}/deployer`, { body: { ...handler, credentials: { GH_TOKEN: "github" } } });
  assert.equal(created.status, 201, created.text);
  assert.deepEqual((created.body as { reaction: { source: string } }).reaction.source, "echo deploy\n");
  const replaced = await ask(t, "PUT", `${handlers}/deployer`, { body: { ...handler, on: ["deploy.*", "deploy.*", " a.b "] } });
  assert.equal(replaced.status, 200, replaced.text);
  assert.deepEqual((replaced.body as { on: string[] }).on, ["deploy.*", "a.b"], "patterns are trimmed and deduplicated");
  const listed = (await ask(t, "GET", handlers, { as: "viewer" })).body as Array<{ name: string; reaction: Record<string, unknown> }>;
  assert.deepEqual(
    listed.map((h) => [h.name, h.reaction]),
    [["deployer", { kind: "script", filename: "deploy.sh", size: 12 }]],
  );
  assert.equal((await ask(t, "GET", `${handlers}/deployer`, { as: "viewer" })).status, 200);
  assert.equal((await ask(t, "DELETE", `${handlers}/deployer`)).status, 204);
  assertError(await ask(t, "GET", `${handlers}/deployer`, { as: "viewer" }), 404, /handler deployer not found in/);
  assertError(await ask(t, "DELETE", `${handlers}/deployer`), 404, /handler deployer not found in/);
});

test("handler routes refuse callers: no token, a forged token, a viewer writing, a non-member", async () => {
  await ask(t, "PUT", `${handlers}/kept`, { body: handler });
  await assertCallerRefusals(t, { method: "GET", url: handlers }, "viewer");
  await assertCallerRefusals(t, { method: "GET", url: `${handlers}/kept` }, "viewer");
  await assertCallerRefusals(t, { method: "PUT", url: `${handlers}/other`, body: handler }, "member");
  await assertCallerRefusals(t, { method: "DELETE", url: `${handlers}/kept` }, "member");
  assert.equal(await countRows(t, "handlers"), 1, "the refused set and delete changed nothing");
  assertError(
    await ask(t, "GET", `${t.other.base}/handlers/kept`, { as: "outsider" }),
    404,
    new RegExp(`handler kept not found in ${t.other.org}/p`),
  );
  assertError(
    await ask(t, "DELETE", `${t.other.base}/handlers/kept`, { as: "outsider" }),
    404,
    new RegExp(`handler kept not found in ${t.other.org}/p`),
  );
  assert.equal(await countRows(t, "handlers"), 1);
});

test("a node or pipeline reaction's env follows core's env rule: FLOW_*, LD_PRELOAD, PATH refused, nothing written", async () => {
  for (const name of ["FLOW_TOKEN", "LD_PRELOAD", "BASH_ENV", "PATH"]) {
    const node = { kind: "node", type: "shell", config: { command: "true", env: { OK: "1", [name]: "x" } } };
    await refusedSet(
      "h",
      { ...handler, reaction: node },
      new RegExp(`^reaction\\.config\\.env\\.${name}: env variable "${name}" is refused`),
    );
    const yaml = `jobs:\n  a:\n    env: {${name}: x}\n    steps: [{run: "true"}]\n`;
    await refusedSet(
      "h",
      { ...handler, reaction: { kind: "pipeline", source: yaml, filename: "p.yaml" } },
      new RegExp(`^reaction\\.source: .*jobs\\.a\\.env\\.${name}: env variable "${name}" is refused`),
    );
  }
});

test("a bad handler is a 400 naming the field: when, on, reaction, credentials, name", async () => {
  const bad = await ask(t, "PUT", `${handlers}/h`, { body: { ...handler, when: "event.key ==" } });
  assertError(bad, 400, /^when: .*line 1, column/);
  assert.equal(bad.error?.details?.["field"], "when");
  await refusedSet("h", { ...handler, when: "" }, /^when: /);
  // It would decline every event at delivery ("predicate returned string, not a bool").
  await refusedSet("h", { ...handler, when: '"prod"' }, /^when: the expression is a string, not a bool: a predicate must be true or false/);
  await refusedSet("h", { ...handler, on: [] }, /^on: give at least one type pattern \(an exact type, prefix\.\* or \*\)$/);
  await refusedSet("h", { ...handler, on: ["bad pattern"] }, /^on: pattern "bad pattern" must be an event type/);
  await refusedSet("h", { ...handler, reaction: { ...handler.reaction, kind: "yaml" } }, /^reaction\.kind: /);
  await refusedSet(
    "h",
    { ...handler, reaction: { ...handler.reaction, filename: "a/b.sh" } },
    /^reaction\.filename: filename must be a base name/,
  );
  await refusedSet(
    "h",
    { ...handler, credentials: { "1X": "github" } },
    /^credentials: credential variable "1X" is not an environment variable name/,
  );
  await refusedSet("h", { ...handler, credentials: { LD_PRELOAD: "github" } }, /^credentials: credential variable "LD_PRELOAD" is refused/);
  await refusedSet("h", { ...handler, credentials: { OK: "bad name!" } }, /^credentials\.OK: a credential name is 1-128 of/);
  await refusedSet("-h", handler, /^name: a handler name is 1-64 of/);
  await refusedSet("h", { ...handler, extra: true }, /extra/);
});

test("hostile handlers: NUL and surrogates, deep nesting, percent-encoding, huge numbers", async () => {
  await refusedSet(
    "h",
    { ...handler, reaction: { ...handler.reaction, source: "echo \u0000" } },
    /^body\.reaction\.source holds a NUL character/,
  );
  await refusedSet("h", { ...handler, when: "event.key == '\ud800'" }, /^body\.when holds a lone UTF-16 surrogate/);
  await refusedSet("h", `{"on":["a"],"reaction":${deepJson(200)}}`, /is nested more than 128 levels deep/);
  await refusedSet("h%00", handler, /^path parameter name holds a NUL character/);
  await refusedSet("h%C3%28", handler, /not valid percent-encoding/);
  await refusedSet("h", { ...handler, on: Array.from({ length: 65 }, (_v, i) => `t${i}`) }, /^on: /);
  await refusedSet(
    "h",
    `{"on":["a.b"],"when":1e400,"reaction":{"kind":"script","source":"x","filename":"x.sh"}}`,
    /^body\.when is a number outside the range a JSON number can be stored in/,
  );
  await refusedSet(
    "h",
    { ...handler, reaction: { ...handler.reaction, source: "x".repeat(1024 * 1024 + 1) } },
    /^reaction\.source: the source is over 1048576 bytes$/,
  );
  assertError(await ask(t, "GET", `${handlers}/${"h".repeat(101)}`, { as: "viewer" }), 414, /over 100 characters/);
});
