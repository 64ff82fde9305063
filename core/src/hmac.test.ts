import { test } from "node:test";
import assert from "node:assert/strict";
import { signHmacSha256, verifyHmacSha256, verifyManualHmac } from "./hmac.js";

const body = new TextEncoder().encode('{"hello":"world"}');

void test("signing matches the published HMAC-SHA256 test vector", async () => {
  // RFC 4231 test case 2.
  assert.equal(
    await signHmacSha256("Jefe", "what do ya want for nothing?"),
    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
  );
  await assert.rejects(signHmacSha256("", body), /HMAC signing key is empty/);
});

void test("a good signature verifies, in either case of hex", async () => {
  const signature = await signHmacSha256("s3cret", body);
  assert.match(signature, /^[0-9a-f]{64}$/);
  assert.equal(await verifyHmacSha256("s3cret", body, signature), true);
  assert.equal(await verifyHmacSha256("s3cret", body, signature.toUpperCase()), true);
});

void test("wrong, malformed and wrong-length signatures are false, never a throw", async () => {
  const signature = await signHmacSha256("s3cret", body);
  const flipped = `${signature.slice(0, -1)}${signature.endsWith("0") ? "1" : "0"}`;
  for (const bad of [
    flipped,
    "",
    "zz",
    signature.slice(0, 63),
    `${signature}00`,
    `${signature.slice(0, 62)}zz`,
    " ".repeat(64),
    `sha256=${signature}`,
  ]) {
    assert.equal(await verifyHmacSha256("s3cret", body, bad), false, JSON.stringify(bad));
  }
  assert.equal(await verifyHmacSha256("other", body, signature), false);
  assert.equal(await verifyHmacSha256("s3cret", new TextEncoder().encode('{"hello":"world!"}'), signature), false);
  assert.equal(await verifyHmacSha256("", body, signature), false);
  assert.equal(await verifyHmacSha256("s3cret", body, undefined as unknown as string), false);
});

void test("manual HMAC strips the configured prefix", async () => {
  const signature = await signHmacSha256("k", body);
  assert.equal(await verifyManualHmac({ headerValue: `sha256=${signature}`, prefix: "sha256=", key: "k", rawBody: body }), true);
  assert.equal(await verifyManualHmac({ headerValue: ` v1=${signature} `, prefix: "v1=", key: "k", rawBody: body }), true);
  assert.equal(await verifyManualHmac({ headerValue: signature, prefix: "", key: "k", rawBody: body }), true);
  assert.equal(await verifyManualHmac({ headerValue: signature, prefix: "sha256=", key: "k", rawBody: body }), false);
  assert.equal(await verifyManualHmac({ headerValue: `sha1=${signature}`, prefix: "sha256=", key: "k", rawBody: body }), false);
  assert.equal(await verifyManualHmac({ headerValue: undefined, prefix: "sha256=", key: "k", rawBody: body }), false);
  assert.equal(
    await verifyManualHmac({ headerValue: [`sha256=${signature}`, `sha256=${signature}`], prefix: "sha256=", key: "k", rawBody: body }),
    false,
  );
});
