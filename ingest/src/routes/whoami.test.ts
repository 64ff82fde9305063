import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ask, createTestApp, type TestApp } from "../testing/test-app.js";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(() => t.close());

test("whoami names the caller and its projects", async () => {
  const res = await ask(t, "GET", "/api/v1/whoami", { as: "viewer" });
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, { user: "vera", projects: [{ org: t.project.org, project: "p", role: "viewer" }] });
});

test("whoami without a token is a 401 that says how to log in", async () => {
  const res = await ask(t, "GET", "/api/v1/whoami", { as: "none" });
  assert.equal(res.status, 401);
  assert.equal(res.error?.code, "unauthenticated");
  assert.match(res.error?.message ?? "", /no API token was sent/);
  assert.match(res.error?.hint ?? "", /flow login/);
});

test("whoami with a token the server never minted is a 401", async () => {
  for (const token of ["flw_nope", "job_nope", "flw_\u0000", "%00"]) {
    const res = await ask(t, "GET", "/api/v1/whoami", { as: { token } });
    assert.equal(res.status, 401, token);
    assert.match(res.error?.message ?? "", /not valid for this server/);
  }
});

test("healthz answers without a token", async () => {
  const res = await ask(t, "GET", "/healthz", { as: "none" });
  assert.deepEqual([res.status, res.body], [200, { ok: true }]);
});
