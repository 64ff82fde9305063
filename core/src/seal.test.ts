import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "./errors.js";
import { importAesKey, openValue, parseMasterKey, sealValue, unwrapOrgKey, wrapOrgKey } from "./seal.js";
import type { SealContext } from "./seal.js";

const random = (n: number): Uint8Array => globalThis.crypto.getRandomValues(new Uint8Array(n));
const iv = (): Uint8Array => random(12);
const ctx: SealContext = { org: "org-1", project: "prj-1", kind: "secret", name: "DB_PASSWORD" };
const PLAINTEXT = "correct horse battery staple ✓";

/** Asserts the promise rejects with a FlowError("internal") that says the value could not be opened and leaks nothing. */
const assertFailsClosed = async (p: Promise<unknown>, ...mustNotContain: string[]): Promise<void> => {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof FlowError, String(err));
    assert.equal(err.code, "internal");
    assert.match(err.message, /could not be opened/);
    assert.match(err.message, /wrong master key/);
    for (const s of [PLAINTEXT, ...mustNotContain]) assert.ok(!err.message.includes(s), `message leaks ${s}`);
    assert.ok(!JSON.stringify(err.toJSON()).includes(PLAINTEXT));
    return true;
  });
};

const setup = async (): Promise<{ master: CryptoKeyLike; orgRaw: Uint8Array; orgKey: CryptoKeyLike; wrapped: Uint8Array }> => {
  const master = await importAesKey(random(32));
  const orgRaw = random(32);
  const wrapped = await wrapOrgKey(master, orgRaw, "org-1", iv());
  const orgKey = await importAesKey(await unwrapOrgKey(master, wrapped, "org-1"));
  return { master, orgRaw, orgKey, wrapped };
};
type CryptoKeyLike = Awaited<ReturnType<typeof importAesKey>>;

const hex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

void test("a sealed value opens back to the same text with the same org, project, kind and name", async () => {
  const { orgKey } = await setup();
  const sealed = await sealValue(orgKey, PLAINTEXT, ctx, iv());
  assert.equal(await openValue(orgKey, sealed, { ...ctx }), PLAINTEXT);
  assert.equal(await openValue(orgKey, await sealValue(orgKey, "", ctx, iv()), ctx), "");
});

void test("a sealed value is version byte, 12-byte IV, then ciphertext and tag, and does not contain the plaintext", async () => {
  const { orgKey } = await setup();
  const nonce = iv();
  const sealed = await sealValue(orgKey, PLAINTEXT, ctx, nonce);
  assert.equal(sealed[0], 1);
  assert.deepEqual(sealed.subarray(1, 13), nonce);
  assert.equal(sealed.length, 1 + 12 + new TextEncoder().encode(PLAINTEXT).length + 16);
  assert.ok(!new TextDecoder().decode(sealed).includes("horse"));
  const again = await sealValue(orgKey, PLAINTEXT, ctx, iv());
  assert.notDeepEqual(again, sealed);
});

void test("a sealed value moved to another name, project, org or kind fails to open", async () => {
  const { orgKey } = await setup();
  const sealed = await sealValue(orgKey, PLAINTEXT, ctx, iv());
  await assertFailsClosed(openValue(orgKey, sealed, { ...ctx, name: "API_TOKEN" }));
  await assertFailsClosed(openValue(orgKey, sealed, { ...ctx, project: "prj-2" }));
  await assertFailsClosed(openValue(orgKey, sealed, { ...ctx, org: "org-2" }));
  await assertFailsClosed(openValue(orgKey, sealed, { ...ctx, kind: "credential" }));
  // Field boundaries count: ("prj", "1x") is not ("prj1", "x").
  const a = await sealValue(orgKey, PLAINTEXT, { ...ctx, project: "p", name: "qN" }, iv());
  await assertFailsClosed(openValue(orgKey, a, { ...ctx, project: "pq", name: "N" }));
});

void test("one org's data key cannot open another org's values", async () => {
  const { orgKey } = await setup();
  const other = await importAesKey(random(32));
  const sealed = await sealValue(orgKey, PLAINTEXT, ctx, iv());
  await assertFailsClosed(openValue(other, sealed, ctx));
});

void test("a wrong master key fails closed and the message holds no key material", async () => {
  const { orgRaw, wrapped } = await setup();
  const wrongRaw = random(32);
  const wrong = await importAesKey(wrongRaw);
  await assertFailsClosed(unwrapOrgKey(wrong, wrapped, "org-1"), hex(orgRaw), hex(wrongRaw));
});

void test("a wrapped org key moved to another org fails to open", async () => {
  const { master, wrapped } = await setup();
  await assertFailsClosed(unwrapOrgKey(master, wrapped, "org-2"));
});

void test("the unwrapped org key is the one that was wrapped", async () => {
  const master = await importAesKey(random(32));
  const orgRaw = random(32);
  const wrapped = await wrapOrgKey(master, orgRaw, "org-9", iv());
  assert.deepEqual(await unwrapOrgKey(master, wrapped, "org-9"), orgRaw);
});

void test("any altered byte of a sealed value makes it fail to open", async () => {
  const { orgKey } = await setup();
  const sealed = await sealValue(orgKey, PLAINTEXT, ctx, iv());
  for (let i = 0; i < sealed.length; i++) {
    const tampered = sealed.slice();
    tampered[i] = (tampered[i] as number) ^ 0x01;
    await assertFailsClosed(openValue(orgKey, tampered, ctx));
  }
  await assertFailsClosed(openValue(orgKey, sealed.subarray(0, sealed.length - 1), ctx));
  await assertFailsClosed(openValue(orgKey, new Uint8Array(0), ctx));
});

void test("an unknown format version is named in the error", async () => {
  const { orgKey } = await setup();
  const sealed = await sealValue(orgKey, PLAINTEXT, ctx, iv());
  sealed[0] = 2;
  await assert.rejects(openValue(orgKey, sealed, ctx), /unknown sealed format version 2/);
});

void test("the master key is read from base64 or from 64 hex digits", () => {
  const raw = random(32);
  assert.deepEqual(parseMasterKey(btoa(String.fromCharCode(...raw))), raw);
  assert.deepEqual(parseMasterKey(`${btoa(String.fromCharCode(...raw))}\n`), raw);
  assert.deepEqual(parseMasterKey(btoa(String.fromCharCode(...raw)).replace(/=$/, "")), raw);
  assert.deepEqual(parseMasterKey(hex(raw)), raw);
  assert.deepEqual(parseMasterKey(hex(raw).toUpperCase()), raw);
  const urlSafe = btoa(String.fromCharCode(...raw))
    .replace(/\+/g, "-")
    .replace(/\//g, "_");
  assert.deepEqual(parseMasterKey(urlSafe), raw);
});

void test("a malformed master key is refused with the expected format and how to make one", () => {
  const raw = random(32);
  const short = btoa(String.fromCharCode(...raw.subarray(0, 16)));
  const long = btoa(String.fromCharCode(...random(48)));
  const bad = ["", "   ", "changeme", short, long, hex(raw).slice(2), `${hex(raw)}00`, `${hex(raw).slice(1)}g`, "!".repeat(44)];
  for (const text of bad) {
    assert.throws(
      () => parseMasterKey(text),
      (err: unknown) => {
        assert.ok(err instanceof FlowError);
        assert.equal(err.code, "config");
        assert.match(err.message, /32 bytes/);
        assert.match(err.message, /base64/);
        assert.match(err.message, /hex/);
        assert.match(err.message, /openssl rand -base64 32/);
        if (text.trim().length > 3) assert.ok(!err.message.includes(text.trim()), "the key text is echoed");
        return true;
      },
      JSON.stringify(text),
    );
  }
});

void test("keys and IVs of the wrong size are refused", async () => {
  await assert.rejects(importAesKey(random(16)), /32 bytes/);
  const master = await importAesKey(random(32));
  await assert.rejects(wrapOrgKey(master, random(16), "org-1", iv()), /32 bytes/);
  await assert.rejects(sealValue(master, "x", ctx, random(8)), /IV must be 12 bytes/);
});
