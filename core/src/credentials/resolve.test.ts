import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "../errors.js";
import type { CredentialValue } from "./kinds.js";
import {
  checkConnection,
  credentialMapProblems,
  layerJobEnv,
  parseCredentialFlag,
  resolveJobCredentials,
  type ResolvedHolding,
} from "./resolve.js";

const held = (value: CredentialValue): ResolvedHolding => ({ credential: { kind: value.kind }, value });
const holdings = new Map<string, ResolvedHolding>([
  ["github", held({ kind: "bearer", token: "gh-token" })],
  ["registry", held({ kind: "basic", username: "ci", password: "pw-1" })],
  ["sealed-elsewhere", { credential: { kind: "bearer" } }],
  ["both", { credential: { kind: "bearer" }, account: { status: "active" } }],
  ["gone", { account: { status: "needs_reauth" } }],
  ["slack", { account: { status: "refreshing" }, accountToken: "xoxb-1" }],
]);

void test("declared credentials become variables: the raw value, username:password for basic, with their masks", () => {
  const r = resolveJobCredentials({ declared: { GH_TOKEN: "github", REG: "registry", CHAT: "slack" }, trusted: true, holdings });
  assert.ok(r.ok);
  assert.deepEqual(r.env, { GH_TOKEN: "gh-token", REG: "ci:pw-1", CHAT: "xoxb-1" });
  assert.ok(r.masks.includes("gh-token") && r.masks.includes("ci:pw-1") && r.masks.includes("pw-1") && r.masks.includes("xoxb-1"));
});

void test("nothing declared resolves to nothing, trusted or not", () => {
  assert.deepEqual(resolveJobCredentials({ declared: {}, trusted: false, holdings }), { ok: true, env: {}, masks: [] });
});

void test("fail closed: missing, unopenable, conflicting or reconnect-needing names fail the job, every one said, none handed out", () => {
  const r = resolveJobCredentials({
    declared: { A: "github", B: "nope", C: "sealed-elsewhere", D: "both", E: "gone" },
    trusted: true,
    holdings,
  });
  assert.ok(!r.ok);
  assert.equal(r.problems.length, 4);
  assert.match(r.problems[0]!, /^B: credential "nope" is not set in this project: set it with `flow credential set nope --kind/);
  assert.match(r.problems[1]!, /^C: credential "sealed-elsewhere" does not open with this server's keys/);
  assert.match(r.problems[2]!, /^D: "both" is held by both a credential and a connected account/);
  assert.match(r.problems[3]!, /^E: connected account "gone" is needs_reauth: reconnect it/);
  assert.ok(!("env" in r), "a failed resolution hands out no variable");
});

void test("an untrusted run gets no credential, and one that declares any fails", () => {
  const r = resolveJobCredentials({ declared: { GH_TOKEN: "github" }, trusted: false, holdings });
  assert.ok(!r.ok);
  assert.match(r.problems[0]!, /untrusted event and gets no credentials, but it declares GH_TOKEN=github/);
  assert.ok(!JSON.stringify(r).includes("gh-token"));
});

void test("variables the loader, shells or interpreters read are refused as secret names are, in the map and in the flag", () => {
  const hostile = [
    "LD_PRELOAD",
    "ld_preload",
    "BASH_ENV",
    "PATH",
    "NODE_OPTIONS",
    "FLOW_AGENT_SOCKET",
    "A\u0000B",
    "1X",
    "",
    "X".repeat(101),
    "\ud800",
  ];
  for (const variable of hostile) {
    const problems = credentialMapProblems({ [variable]: "github" });
    assert.equal(problems.length, 1, JSON.stringify(variable));
    assert.match(problems[0]!, /^credentials\./);
    const r = resolveJobCredentials({ declared: { [variable]: "github" }, trusted: true, holdings });
    assert.ok(!r.ok, `resolved ${JSON.stringify(variable)}`);
  }
  assert.match(credentialMapProblems({ LD_PRELOAD: "github" })[0]!, /credential variable "LD_PRELOAD" is refused: the dynamic loader/);
  assert.match(credentialMapProblems({ OK: "a/b" })[0]!, /^credentials\.OK: credential name "a\/b" is not allowed/);
  assert.match(credentialMapProblems(Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`V${i}`, "x"])))[0]!, /at most 64/);
  assert.throws(
    () => parseCredentialFlag("LD_PRELOAD=github"),
    (e: unknown) => e instanceof FlowError && /--credential\.LD_PRELOAD: .*refused/.test(e.message),
  );
  for (const bad of ["GH_TOKEN", "=github", "GH_TOKEN=", "GH TOKEN=github"]) assert.throws(() => parseCredentialFlag(bad), FlowError, bad);
  assert.deepEqual(parseCredentialFlag("GH_TOKEN=github.app"), ["GH_TOKEN", "github.app"]);
});

void test("a named credential wins over a secret and a literal env var of the same variable; env wins over a secret", () => {
  const env = layerJobEnv(
    { TOKEN: "secret", ONLY_SECRET: "s", SHARED: "secret" },
    { TOKEN: "literal", SHARED: "literal" },
    { TOKEN: "credential" },
  );
  assert.deepEqual(env, { TOKEN: "credential", ONLY_SECRET: "s", SHARED: "literal" });
  const proto = layerJobEnv({}, {}, JSON.parse('{"__proto__":"x"}') as Record<string, string>);
  assert.equal(Object.getPrototypeOf(proto), Object.prototype);
  assert.deepEqual(Object.keys(proto), ["__proto__"]);
});

void test("the requirement states: ok, missing, wrong_kind, conflict, needs_reconnect, with the stored kind when something is stored", () => {
  assert.deepEqual(checkConnection("github", holdings.get("github"), ["bearer", "url_token"]), { state: "ok", stored_kind: "bearer" });
  assert.equal(checkConnection("nope", undefined).state, "missing");
  assert.equal(checkConnection("nope", undefined).stored_kind, undefined);
  const wrong = checkConnection("registry", holdings.get("registry"), ["bearer", "url_token"]);
  assert.equal(wrong.state, "wrong_kind");
  assert.equal(wrong.stored_kind, "basic");
  assert.match(wrong.problem!, /stored as basic; bearer or url-token is required/);
  assert.equal(checkConnection("both", holdings.get("both")).state, "conflict");
  assert.equal(checkConnection("gone", holdings.get("gone")).state, "needs_reconnect");
  assert.equal(checkConnection("slack", holdings.get("slack"), ["api_key"]).state, "wrong_kind");
  assert.equal(checkConnection("slack", holdings.get("slack"), ["bearer"]).state, "ok");
});
