import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "../errors.js";
import { accountProvidersFromEnv, parseAccountProviders, readJsonPointer } from "./providers.js";

const github = {
  name: "github",
  authorize_url: "https://github.com/login/oauth/authorize",
  token_url: "https://github.com/login/oauth/access_token",
  client_id: "Iv1.abc",
  client_secret: "s3cr3t-value",
  scopes: [],
  capabilities: { rotates_refresh_token: true, reuse_revokes_family: false },
  identity: { url: "https://api.github.com/user", id_pointer: "/id", label_pointer: "/login" },
  revoke_url: "https://api.github.com/applications/Iv1.abc/token",
};
const REDIRECT = "https://flow.example.com/oauth/callback";

const problemsOf = (providers: unknown, redirect: string | undefined = REDIRECT): string[] => {
  const r = accountProvidersFromEnv(typeof providers === "string" ? providers : JSON.stringify(providers), redirect);
  return r.ok ? [] : r.problems;
};
const withField = (patch: Record<string, unknown>): unknown => [{ ...github, ...patch }];

void test("a valid provider list parses, keyed by name; unset variables mean no providers and no redirect needed", () => {
  const c = parseAccountProviders(
    JSON.stringify([github, { ...github, name: "slack", revoke_url: undefined, assumed_lifetime_secs: 43200 }]),
    REDIRECT,
  );
  assert.deepEqual([...c.providers.keys()], ["github", "slack"]);
  assert.equal(c.providers.get("slack")?.assumed_lifetime_secs, 43200);
  assert.equal(c.redirectUri, REDIRECT);
  assert.equal(parseAccountProviders(undefined, undefined).providers.size, 0);
  assert.equal(parseAccountProviders("", "").providers.size, 0);
  // Local development may use plain http on the loopback names.
  for (const host of ["localhost:9", "127.0.0.1:9", "[::1]:9"])
    assert.deepEqual(problemsOf(withField({ token_url: `http://${host}/token` }), `http://${host}/oauth/callback`), []);
});

void test("a non-https URL refuses the start naming the provider and the field, and never echoes the client secret", () => {
  const problems = problemsOf(withField({ token_url: "http://evil.example/token" }));
  assert.equal(problems.length, 1);
  assert.match(problems[0]!, /^FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS\[0\] \(provider github\)\.token_url: must be https/);
  // Hosts that only look local.
  for (const url of [
    "http://localhost.evil.example/x",
    "http://127.0.0.1.nip.io/x",
    "http://0.0.0.0/x",
    "ftp://localhost/x",
    "javascript:alert(1)",
  ])
    assert.match(problemsOf(withField({ identity: { ...github.identity, url } })).join("\n"), /\.identity\.url: must be/, url);
  assert.match(problemsOf(withField({ revoke_url: "https://user:pw@x.example/revoke" })).join(), /revoke_url: must not carry a user name/);
  assert.match(problemsOf(withField({ authorize_url: "https://x.example/a#frag" })).join(), /authorize_url: must not have a #fragment/);
  const all = problemsOf(withField({ token_url: "http://evil.example/token", client_id: "" })).join("\n");
  assert.doesNotMatch(all, /s3cr3t/);
  assert.match(all, /client_id: must not be empty/);
});

void test("a missing capabilities object or capability refuses the start: there is no safe default", () => {
  const { capabilities: _, ...without } = github;
  assert.match(problemsOf([without]).join(), /\[0\] \(provider github\)\.capabilities: is required/);
  assert.match(
    problemsOf(withField({ capabilities: { rotates_refresh_token: true } })).join(),
    /capabilities\.reuse_revokes_family: is required/,
  );
  assert.match(
    problemsOf(withField({ capabilities: { rotates_refresh_token: "yes", reuse_revokes_family: false } })).join(),
    /rotates_refresh_token: must be true or false/,
  );
  assert.match(
    problemsOf(withField({ capabilities: { rotates_refresh_token: true, reuse_revokes_family: true, extra: 1 } })).join(),
    /capabilities: Unrecognized key/i,
  );
});

void test("a bad JSON pointer refuses the start; the id pointer must point into the response", () => {
  assert.match(
    problemsOf(withField({ identity: { ...github.identity, id_pointer: "id" } })).join(),
    /identity\.id_pointer: must be a JSON pointer: empty or starting with \//,
  );
  assert.match(
    problemsOf(withField({ identity: { ...github.identity, label_pointer: "/a~2b" } })).join(),
    /identity\.label_pointer: must be a JSON pointer: ~ is only/,
  );
  assert.match(
    problemsOf(withField({ identity: { ...github.identity, id_pointer: "" } })).join(),
    /identity\.id_pointer: must point into the response/,
  );
  assert.match(
    problemsOf(withField({ identity: { url: github.identity.url, id_pointer: "/id" } })).join(),
    /identity\.label_pointer: is required/,
  );
});

void test("hostile values are refused with a place: NUL, lone surrogates, huge numbers, deep nesting, duplicates, not JSON", () => {
  assert.match(problemsOf(withField({ client_id: "a\0b" })).join(), /client_id: holds a NUL/);
  assert.match(problemsOf(withField({ client_secret: "\ud800" })).join(), /client_secret: holds a lone UTF-16 surrogate/);
  assert.match(problemsOf(withField({ scopes: ["repo read"] })).join(), /scopes\.0: must be one scope/);
  assert.match(
    problemsOf(`[${JSON.stringify(github).slice(0, -1)},"assumed_lifetime_secs":1e400}]`).join(),
    /assumed_lifetime_secs: is a number outside/,
  );
  assert.match(problemsOf(withField({ assumed_lifetime_secs: 1.5 })).join(), /assumed_lifetime_secs: must be a whole number/);
  assert.match(problemsOf(withField({ name: "git hub" })).join(), /\[0\]\.name: must be 1-64 letters/);
  assert.match(problemsOf(`${"[".repeat(5000)}${"]".repeat(5000)}`).join(), /deeper|nest/i);
  assert.match(problemsOf("[{").join(), /^FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS: is not JSON/);
  assert.match(problemsOf({ name: "github" }).join(), /^FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS: must be a JSON array/);
  assert.match(problemsOf([github, github]).join(), /\[1\] \(provider github\)\.name: is used by an earlier provider/);
  assert.match(problemsOf(withField({ __proto__: { x: 1 }, extra: 1 })).join(), /Unrecognized key/i);
});

void test("the redirect URI is required with a provider and follows the URL rule", () => {
  assert.match(problemsOf([github], "").join(), /^FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI: is required/);
  assert.match(
    problemsOf([github], "http://flow.example.com/oauth/callback").join(),
    /^FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI: must be https/,
  );
  assert.throws(
    () => parseAccountProviders(JSON.stringify([github]), "nope"),
    (e: unknown) => e instanceof FlowError && e.code === "config" && /REDIRECT_URI: must be an absolute URL/.test(e.message),
  );
});

void test("JSON pointers read identity responses as RFC 6901 says", () => {
  const doc = { id: 42, "a/b": { "m~n": ["x", "y"] }, user: { name: "ann" } };
  assert.equal(readJsonPointer(doc, "/id"), 42);
  assert.equal(readJsonPointer(doc, "/a~1b/m~0n/1"), "y");
  assert.equal(readJsonPointer(doc, "/user/name"), "ann");
  assert.equal(readJsonPointer(doc, "/user/missing"), undefined);
  assert.equal(readJsonPointer(doc, "/a~1b/m~0n/01"), undefined);
  assert.equal(readJsonPointer(doc, "/constructor"), undefined);
  assert.equal(readJsonPointer(doc, "/__proto__"), undefined);
});
