import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "../errors.js";
import { createValueMasker } from "../mask-value.js";
import type { CredentialValue } from "./kinds.js";
import { credentialEnvValue, credentialMaskValues, renderHttpAuth } from "./render.js";

const bearer: CredentialValue = { kind: "bearer", token: "tok-€-1" };
const apiKey: CredentialValue = { kind: "api_key", header: "X-Api-Key", value: "key-123" };
const basic: CredentialValue = { kind: "basic", username: "Aladdin", password: "open sesame" };
const urlToken: CredentialValue = { kind: "url_token", token: "a/b?c#d e" };

void test("each kind becomes its auth: bearer, its api-key header, basic, the url splice", () => {
  const req = { url: "https://api.example/v1", headers: { Accept: "application/json" } };
  assert.deepEqual(renderHttpAuth("gh", bearer, req).headers, { Accept: "application/json", Authorization: "Bearer tok-€-1" });
  assert.deepEqual(renderHttpAuth("k", apiKey, req).headers, { Accept: "application/json", "X-Api-Key": "key-123" });
  // RFC 7617's own example.
  assert.equal(renderHttpAuth("b", basic, req).headers["Authorization"], "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
  const spliced = renderHttpAuth("u", urlToken, { url: "https://hooks.example/{credential}/x?k={credential}", headers: {} });
  assert.equal(spliced.url, "https://hooks.example/a%2Fb%3Fc%23d%20e/x?k=a%2Fb%3Fc%23d%20e");
  assert.deepEqual(spliced.headers, {});
});

void test("basic auth encodes the UTF-8 bytes of username:password", () => {
  const h = renderHttpAuth("b", { kind: "basic", username: "jürgen", password: "пароль" }, { url: "u", headers: {} }).headers;
  assert.equal(h["Authorization"], `Basic ${Buffer.from("jürgen:пароль", "utf8").toString("base64")}`);
});

void test("an explicit headers: entry wins over the credential's header of the same name, whatever its case", () => {
  const req = { url: "https://x", headers: { authorization: "Token explicit" } };
  assert.deepEqual(renderHttpAuth("gh", bearer, req).headers, { authorization: "Token explicit" });
  assert.deepEqual(renderHttpAuth("b", basic, req).headers, { authorization: "Token explicit" });
  const own = renderHttpAuth("k", apiKey, { url: "https://x", headers: { "x-api-key": "mine" } });
  assert.deepEqual(own.headers, { "x-api-key": "mine" });
  // A header of another name does not stop the credential.
  assert.equal(renderHttpAuth("k", apiKey, { url: "https://x", headers: { Authorization: "a" } }).headers["X-Api-Key"], "key-123");
});

void test("a url-token credential whose url has no {credential} is refused: nothing is sent without auth", () => {
  assert.throws(
    () => renderHttpAuth("hook", urlToken, { url: "https://hooks.example/x", headers: {} }),
    (e: unknown) =>
      e instanceof FlowError &&
      /credential hook .*no \{credential\} to replace.*nothing was sent/.test(e.message) &&
      !e.message.includes("a/b"),
  );
});

void test("the env value is the raw secret, username:password for basic; the masks catch the Basic header too", () => {
  assert.equal(credentialEnvValue(bearer), "tok-€-1");
  assert.equal(credentialEnvValue(apiKey), "key-123");
  assert.equal(credentialEnvValue(basic), "Aladdin:open sesame");
  assert.equal(credentialEnvValue(urlToken), "a/b?c#d e");
  const masker = createValueMasker(credentialMaskValues(basic));
  const line = `env=Aladdin:open sesame pw=open sesame header=Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==`;
  assert.equal(masker.text(line), "env=*** pw=*** header=Basic ***");
});
