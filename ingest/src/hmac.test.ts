import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { signHmacSha256, verifyGithubSignature, verifyHmacSha256, verifyManualHmac, webCryptoHmacVerifier } from "@flowsvc/core";
import { nodeHmacVerifier } from "./hmac.js";

void test("Node's HMAC check answers what WebCrypto's does: the right key and body, and every way to be wrong", async () => {
  const body = randomBytes(2048);
  const key = "whsec_\u00e9\u{1F600}key";
  const good = await signHmacSha256(key, body);
  const cases: Array<[string, Uint8Array, string]> = [
    [key, body, good],
    [key, body, good.toUpperCase()],
    ["other", body, good],
    [key, Buffer.concat([body, Buffer.from("x")]), good],
    [key, body, `${good.slice(0, 63)}${good[63] === "0" ? "1" : "0"}`],
    [key, body, good.slice(0, 62)],
    [key, body, `${good}00`],
    [key, body, "zz".repeat(32)],
    [key, body, ""],
    ["", body, good],
    [key, new Uint8Array(0), await signHmacSha256(key, new Uint8Array(0))],
  ];
  for (const [k, b, sig] of cases) {
    const web = await verifyHmacSha256(k, b, sig, webCryptoHmacVerifier);
    assert.equal(await verifyHmacSha256(k, b, sig, nodeHmacVerifier), web, `${k} ${sig}`);
  }
  assert.equal(await verifyHmacSha256(key, body, good, nodeHmacVerifier), true);
  assert.equal(await verifyGithubSignature(key, body, `sha256=${good}`, nodeHmacVerifier), true);
  assert.equal(await verifyGithubSignature(key, body, [`sha256=${good}`, `sha256=${good}`], nodeHmacVerifier), false);
  assert.equal(await verifyManualHmac({ headerValue: `v1=${good}`, prefix: "v1=", key, rawBody: body, verify: nodeHmacVerifier }), true);
  assert.equal(
    await verifyManualHmac({ headerValue: `v1=${good}`, prefix: "v1=", key: "k2", rawBody: body, verify: nodeHmacVerifier }),
    false,
  );
});

void test("a verifier that throws counts as a refusal, not an error (the route answers 401)", async () => {
  const body = Buffer.from("{}");
  const good = await signHmacSha256("k", body);
  const broken = (): boolean => {
    throw new Error("boom");
  };
  assert.equal(await verifyHmacSha256("k", body, good, broken), false);
  assert.equal(await verifyHmacSha256("k", body, good, () => 1 as unknown as boolean), false, "only true is a match");
});
