import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError, httpStatusOf } from "../errors.js";
import {
  CREDENTIAL_NAME_MAX,
  credentialFromSealedText,
  credentialNameProblem,
  credentialToSealedText,
  parseCredentialKind,
  parseCredentialValue,
} from "./kinds.js";

const refusal = (fn: () => unknown): FlowError => {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof FlowError, String(err));
    assert.equal(httpStatusOf(err.code), 400);
    return err;
  }
  assert.fail("expected a refusal");
};

void test("each kind parses from its CLI and its stored spelling, and is kept as stored", () => {
  assert.equal(parseCredentialKind("api-key"), "api_key");
  assert.equal(parseCredentialKind("api_key"), "api_key");
  assert.equal(parseCredentialKind("url-token"), "url_token");
  assert.equal(parseCredentialKind("bearer"), "bearer");
  assert.equal(parseCredentialKind("Bearer"), undefined);
  assert.equal(parseCredentialKind("oauth"), undefined);
  assert.deepEqual(parseCredentialValue("gh", { kind: "bearer", token: "t0k3n" }), { kind: "bearer", token: "t0k3n" });
  assert.deepEqual(parseCredentialValue("llm", { kind: "api-key", header: "x-api-key", value: "k" }), {
    kind: "api_key",
    header: "x-api-key",
    value: "k",
  });
  assert.deepEqual(parseCredentialValue("reg", { kind: "basic", username: "ci", password: "p:w" }), {
    kind: "basic",
    username: "ci",
    password: "p:w",
  });
  assert.deepEqual(parseCredentialValue("hook", { kind: "url-token", token: "abc" }), { kind: "url_token", token: "abc" });
});

void test("a bad kind, a missing field and a field of another kind are all named, at once, with the field", () => {
  assert.match(
    refusal(() => parseCredentialValue("x", { kind: "oauth", token: "t" })).message,
    /kind: must be one of bearer, api-key, basic, url-token; got "oauth"/,
  );
  assert.match(refusal(() => parseCredentialValue("x", { token: "t" })).message, /kind: .*no kind was given/);
  const e = refusal(() => parseCredentialValue("x", { kind: "basic", username: "u", token: "t" }));
  assert.match(e.message, /^credential x: /);
  assert.match(e.message, /token: a basic credential has no such field \(it takes username, password\)/);
  assert.match(e.message, /password: required for a basic credential/);
  assert.match(refusal(() => parseCredentialValue("x", { kind: "bearer", token: 42 })).message, /token: must be a JSON string/);
  assert.match(refusal(() => parseCredentialValue("x", ["bearer"])).message, /body must be a JSON object/);
  assert.match(refusal(() => parseCredentialValue("x", null)).message, /body must be a JSON object/);
});

void test("hostile values are refused without being quoted: NUL, lone surrogates, line breaks, huge", () => {
  const cases: Array<[unknown, RegExp]> = [
    [{ kind: "bearer", token: "" }, /token: the value is empty/],
    [{ kind: "bearer", token: "ab\u0000cd-SECRET" }, /token: .*NUL byte/],
    [{ kind: "bearer", token: "ab\ud800cd-SECRET" }, /token: .*lone surrogate/],
    [{ kind: "bearer", token: "ab\r\nX-Injected: 1-SECRET" }, /token: .*control character/],
    [{ kind: "url-token", token: "a".repeat(64 * 1024 + 1) }, /token: a credential value is at most 65536 bytes/],
    [{ kind: "api-key", header: "X-Key", value: "v\nSECRET" }, /value: .*control character/],
    [{ kind: "basic", username: "a:b", password: "SECRET" }, /username: .*":"/],
    [{ kind: "basic", username: "u".repeat(1025), password: "SECRET" }, /username: a username is at most 1024/],
    [{ kind: "basic", username: "u", password: "\udc00SECRET" }, /password: .*lone surrogate/],
  ];
  for (const [body, want] of cases) {
    const e = refusal(() => parseCredentialValue("c", body));
    assert.match(e.message, want);
    assert.ok(!e.message.includes("SECRET"), `the message quotes the value: ${e.message}`);
  }
});

void test("an api-key header must be a header name, and not one that frames the request", () => {
  for (const header of ["", "X Key", "X-Key:", "Ünicode", "a\u0000b", "h".repeat(129)])
    assert.match(refusal(() => parseCredentialValue("c", { kind: "api-key", header, value: "v" })).message, /header: /, header);
  for (const header of ["Host", "content-length", "Transfer-Encoding", "Connection"])
    assert.match(refusal(() => parseCredentialValue("c", { kind: "api-key", header, value: "v" })).message, /frames the request/, header);
  assert.doesNotThrow(() => parseCredentialValue("c", { kind: "api-key", header: "Authorization", value: "Token v" }));
});

void test("credential names: letters, digits . _ -, not starting with a separator, at most 100", () => {
  for (const name of ["github", "gh.token", "A_1", "0x", "a-b", "x".repeat(CREDENTIAL_NAME_MAX)])
    assert.equal(credentialNameProblem(name), undefined, name);
  for (const name of ["", "-x", ".x", "a/b", "a b", "a\u0000", "é", "..", "a%2Fb", "x".repeat(CREDENTIAL_NAME_MAX + 1), "\ud800"])
    assert.ok(credentialNameProblem(name), JSON.stringify(name));
});

void test("the sealed text comes back only under the kind it was sealed with", () => {
  const c = parseCredentialValue("c", { kind: "bearer", token: "t" });
  assert.deepEqual(credentialFromSealedText(credentialToSealedText(c), "bearer"), c);
  assert.equal(credentialFromSealedText(credentialToSealedText(c), "url_token"), undefined);
  assert.equal(credentialFromSealedText("not json", "bearer"), undefined);
  assert.equal(credentialFromSealedText('{"kind":"bearer"}', "bearer"), undefined);
});
