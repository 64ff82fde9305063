import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { FlowError, importAesKey, openValue, sealValue, unwrapOrgKey, wrapOrgKey, type SealContext } from "@flowsvc/core";
import { nodeAesKey } from "./keyring.js";

const ctx: SealContext = { org: "org-1", project: "prj-1", kind: "journal", name: "run-1#3" };
const TEXT = "token=s3cr3t-value ✓ \u{1F600}";

const failsClosed = async (p: Promise<unknown>): Promise<void> => {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof FlowError && err.code === "internal", String(err));
    assert.match(err.message, /could not be opened/);
    assert.ok(!err.message.includes(TEXT));
    return true;
  });
};

void test("the keyring's Node cipher and core's WebCrypto key write the same blobs: each opens what the other sealed (rows sealed before stay readable)", async () => {
  const raw = randomBytes(32);
  const node = nodeAesKey(raw);
  const web = await importAesKey(raw);
  const iv = randomBytes(12);
  const a = await sealValue(node, TEXT, ctx, iv);
  const b = await sealValue(web, TEXT, ctx, iv);
  assert.deepEqual(Buffer.from(a), Buffer.from(b), "same key, IV and AAD: the same bytes");
  assert.equal(await openValue(node, b, ctx), TEXT);
  assert.equal(await openValue(web, a, ctx), TEXT);
  const orgRaw = randomBytes(32);
  assert.deepEqual(Buffer.from(await unwrapOrgKey(web, await wrapOrgKey(node, orgRaw, "org-1", randomBytes(12)), "org-1")), orgRaw);
  assert.deepEqual(Buffer.from(await unwrapOrgKey(node, await wrapOrgKey(web, orgRaw, "org-1", randomBytes(12)), "org-1")), orgRaw);
});

void test("the Node cipher fails closed: another place, another key, one flipped bit, a cut tag, nothing at all", async () => {
  const node = nodeAesKey(randomBytes(32));
  const sealed = await sealValue(node, TEXT, ctx, randomBytes(12));
  await failsClosed(openValue(node, sealed, { ...ctx, name: "run-1#4" }));
  await failsClosed(openValue(node, sealed, { ...ctx, kind: "secret" }));
  await failsClosed(openValue(nodeAesKey(randomBytes(32)), sealed, ctx));
  for (const at of [1, 13, sealed.length - 1]) {
    const flipped = Uint8Array.from(sealed);
    flipped[at]! ^= 1;
    await failsClosed(openValue(node, flipped, ctx));
  }
  await failsClosed(openValue(node, sealed.subarray(0, sealed.length - 1), ctx));
  await failsClosed(openValue(node, sealed.subarray(0, 13 + 15), ctx));
  await failsClosed(openValue(node, new Uint8Array(0), ctx));
  assert.throws(() => nodeAesKey(randomBytes(16)), /32 bytes/);
  await assert.rejects(sealValue(node, TEXT, ctx, randomBytes(8)), /IV must be 12 bytes/);
});
