/**
 * The members plugin (routes/members.ts) over app.inject(): an admin lists, sets roles and removes;
 * a project keeps its last admin; hostile user names are refused; and a granter who leaves takes
 * the use of the accounts they granted with them, in the removal's own transaction.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  ask,
  assertCallerRefusals,
  assertError,
  connectTestAccount,
  createTestApp,
  dispatchJob,
  type TestApp,
} from "../testing/test-app.js";

let t: TestApp;
let members: string;
before(async () => {
  t = await createTestApp();
  members = `${t.project.base}/members`;
});
after(() => t.close());

const roles = async (): Promise<Record<string, string>> =>
  Object.fromEntries(
    ((await ask(t, "GET", members, { as: "admin" })).body as Array<{ user: string; role: string }>).map((m) => [m.user, m.role]),
  );
const setRole = (user: string, role: unknown) => ask(t, "PUT", `${members}/${user}`, { as: "admin", body: { role } });

test("only an admin lists, sets and removes members; the list names each member's role", async () => {
  await assertCallerRefusals(t, { method: "GET", url: members }, "admin");
  await assertCallerRefusals(t, { method: "PUT", url: `${members}/vera`, body: { role: "member" } }, "admin");
  await assertCallerRefusals(t, { method: "DELETE", url: `${members}/vera` }, "admin");
  assert.deepEqual(await roles(), { ada: "admin", mo: "member", vera: "viewer" });
});

test("setting a role: promote, add a user from another project, refuse an unknown user, a bad role or a bad body", async () => {
  const up = await setRole("vera", "member");
  assert.equal(up.status, 200, up.text);
  assert.deepEqual(up.body, { user: "vera", role: "member", added: false });
  assert.deepEqual((await setRole("olga", "viewer")).body, { user: "olga", role: "viewer", added: true });
  assert.equal((await ask(t, "GET", `${t.project.base}/runs`, { as: "outsider" })).status, 200, "olga now reads this project");
  assertError(await setRole("nobody", "viewer"), 404, /no user named "nobody" on this server/);
  assertError(await setRole("vera", "owner"), 400, /role: must be one of viewer, member, admin/);
  assertError(await ask(t, "PUT", `${members}/vera`, { as: "admin", body: '{"role": 1e400}' }), 400, /role/);
  assertError(await ask(t, "PUT", `${members}/vera`, { as: "admin", body: { role: "viewer", extra: 1 } }), 400, /extra/);
  assertError(await ask(t, "PUT", `${members}/vera`, { as: "admin", body: "[[[[" }), 400, /./);
  assert.equal((await roles())["vera"], "member", "nothing half-written");
  assert.equal((await setRole("vera", "viewer")).status, 200);
  assert.equal((await ask(t, "DELETE", `${members}/olga`, { as: "admin" })).status, 200);
});

test("hostile user names are refused before anything is read: NUL, lone surrogate, bad percent-encoding, slashes, 10k characters", async () => {
  const cases: Array<[string, number, RegExp]> = [
    ["a%00b", 400, /NUL|U\+0000/],
    ["%ED%A0%80", 400, /./],
    ["%E0%A4%A", 400, /./],
    ["a%2Fb", 400, /user name "a\/b" is not allowed/],
    ["%2e%2e%2Fada", 400, /user name "..\/ada" is not allowed/],
    ["ada%0A", 400, /user name "ada\\n" is not allowed/],
    ["x".repeat(101), 414, /is over 100 characters/],
    ["x".repeat(10_000), 414, /is over 100 characters/],
  ];
  for (const [user, status, message] of cases) {
    assertError(await setRole(user, "admin"), status, message, `PUT ${user.slice(0, 20)}`);
    assertError(await ask(t, "DELETE", `${members}/${user}`, { as: "admin" }), status, message, `DELETE ${user.slice(0, 20)}`);
  }
  assert.deepEqual(await roles(), { ada: "admin", mo: "member", vera: "viewer" });
});

test("the last admin can be neither demoted nor removed; with a second admin either can go", async () => {
  assertError(await setRole("ada", "member"), 409, /ada is the last admin of .*: a project keeps at least one/);
  assertError(await ask(t, "DELETE", `${members}/ada`, { as: "admin" }), 409, /ada is the last admin/);
  assertError(await ask(t, "DELETE", `${members}/olga`, { as: "admin" }), 404, /olga is not a member of/);
  assert.equal((await setRole("mo", "admin")).status, 200);
  assert.equal((await setRole("mo", "member")).status, 200, "one of two admins may step down");
  assert.deepEqual(await roles(), { ada: "admin", mo: "member", vera: "viewer" });
});

test("removing a granter disables every account they granted here, at once; a job naming one fails; rejoining does not revive it", async () => {
  await connectTestAccount(t, { name: "mo-gh", status: "active", granter: "mo", accessToken: "tok-mo-gh-must-not-leak" });
  await connectTestAccount(t, { name: "mo-slack", status: "needs_reauth", granter: "mo" });
  await connectTestAccount(t, { name: "ada-gh", status: "active" });
  const listed = (await ask(t, "GET", members, { as: "admin" })).body as Array<{ user: string; granted: string[] }>;
  assert.deepEqual(listed.find((m) => m.user === "mo")?.granted, ["mo-gh", "mo-slack"]);

  const gone = await ask(t, "DELETE", `${members}/mo`, { as: "admin" });
  assert.equal(gone.status, 200, gone.text);
  assert.deepEqual(gone.body, { user: "mo", disabled: ["mo-gh", "mo-slack"] });
  assert.doesNotMatch(gone.text, /tok-/);
  const statuses = Object.fromEntries(
    ((await ask(t, "GET", `${t.project.base}/accounts`, { as: "viewer" })).body as Array<{ name: string; status: string }>).map((a) => [
      a.name,
      a.status,
    ]),
  );
  assert.deepEqual(statuses, { "ada-gh": "active", "mo-gh": "disabled", "mo-slack": "disabled" });
  assertError(await ask(t, "GET", `${t.project.base}/runs`, { as: "member" }), 404, /not found/, "mo is no member any more");

  const run = await ask(t, "POST", `${t.project.base}/runs`, {
    as: "admin",
    body: { kind: "script", source: "echo $T\n", filename: "job.sh", credentials: { T: "mo-gh" } },
  });
  assert.equal(run.status, 201, run.text);
  const job = await dispatchJob(t, (run.body as { id: string }).id);
  const claimed = await ask(t, "POST", "/agent/v1/claim", { as: { token: job.token }, body: { agent_id: "agent-1" } });
  assertError(claimed, 409, /T: connected account "mo-gh" is disabled: reconnect it on the Connections page/);
  assert.doesNotMatch(claimed.text, /tok-mo-gh/);

  assert.equal((await setRole("mo", "member")).status, 200);
  const after = (await ask(t, "GET", `${t.project.base}/accounts`, { as: "viewer" })).body as Array<{ name: string; status: string }>;
  assert.equal(after.find((a) => a.name === "mo-gh")?.status, "disabled", "coming back does not revive a grant: reconnect it");
});

test("two admins removing each other at once: one goes, the project keeps an admin", async () => {
  assert.equal((await setRole("mo", "admin")).status, 200);
  const [byMo, byAda] = await Promise.all([
    ask(t, "DELETE", `${members}/ada`, { as: "member" }),
    ask(t, "DELETE", `${members}/mo`, { as: "admin" }),
  ]);
  assert.equal([byMo.status, byAda.status].filter((s) => s === 200).length, 1, `${byMo.text} / ${byAda.text}`);
  const { rows } = await t.db.pool.query<{ n: string }>(`select count(*) as n from memberships where project_id = $1 and role = 'admin'`, [
    t.project.projectId,
  ]);
  assert.equal(Number(rows[0]!.n), 1);
});
