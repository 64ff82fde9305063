/**
 * The event hooks plugin (routes/hooks.ts) over app.inject(): managing hooks (viewers read, admins
 * write) and ingesting deliveries (the hook's secret or the delivery's signature is the credential).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { mintHookSecret } from "@flowsvc/store";
import { ask, assertCallerRefusals, assertError, countRows, createTestApp, deepJson, type TestApp } from "../testing/test-app.js";

let t: TestApp;
let hooks: string;
before(async () => {
  t = await createTestApp({ publicUrl: "https://flow.example.com/" });
  hooks = `${t.project.base}/event-hooks`;
});
after(() => t.close());

const GITHUB_KEY = "github-signing-key";

/** A hook created by an admin; its secret. */
const created = async (name: string, body: unknown): Promise<string> => {
  const res = await ask(t, "PUT", `${hooks}/${name}`, { as: "admin", body });
  assert.equal(res.status, 201, res.text);
  return (res.body as { secret: string }).secret;
};

/** A delivery to a hook's ingest URL, with no user token: the headers are the credential. */
const deliver = (name: string, body: string | Buffer, headers: Record<string, string> = {}, query = "") =>
  ask(t, "POST", `/api/v1/hooks/${t.project.org}/p/${name}${query}`, {
    as: "none",
    body,
    headers: { "content-type": "application/json", ...headers },
  });

const sign = (key: string, body: string | Buffer): string => createHmac("sha256", key).update(body).digest("hex");

/** A delivery that must be refused with `status` and `message`, recording no event. */
const refusedDelivery = async (what: string, send: () => ReturnType<typeof deliver>, status: number, message: RegExp): Promise<void> => {
  const before = await countRows(t, "events");
  assertError(await send(), status, message, what);
  assert.equal(await countRows(t, "events"), before, `${what}: nothing was recorded`);
};

test("an admin creates a token hook (201 with its secret, once), replaces it (200, secret kept), rotates and removes it", async () => {
  const res = await ask(t, "PUT", `${hooks}/ci`, { as: "admin", body: { event_type: "ci.done" } });
  assert.equal(res.status, 201, res.text);
  const hook = res.body as { secret: string; ingest_url: string; emits: string };
  assert.equal(hook.ingest_url, `https://flow.example.com/api/v1/hooks/${t.project.org}/p/ci`);
  assert.equal(hook.emits, "ci.done");
  const replaced = await ask(t, "PUT", `${hooks}/ci`, { as: "admin", body: { event_type: "ci.finished" } });
  assert.deepEqual([replaced.status, (replaced.body as { secret_kept: boolean }).secret_kept], [200, true]);
  assert.ok(!replaced.text.includes(hook.secret));
  const shown = await ask(t, "GET", `${hooks}/ci`, { as: "viewer" });
  assert.equal((shown.body as { event_type: string }).event_type, "ci.finished");
  assert.ok(!shown.text.includes(hook.secret), "show never answers the secret");
  assert.deepEqual(
    ((await ask(t, "GET", hooks, { as: "viewer" })).body as Array<{ name: string }>).map((h) => h.name),
    ["ci"],
  );
  const rotated = await ask(t, "POST", `${hooks}/ci/rotate`, { as: "admin" });
  const secret = (rotated.body as { secret: string }).secret;
  assert.notEqual(secret, hook.secret);
  await refusedDelivery(
    "the old secret",
    () => deliver("ci", "{}", { "x-flow-hook-secret": hook.secret }),
    401,
    /the secret sent is not the secret of event hook ci/,
  );
  assert.equal((await deliver("ci", "{}", { "x-flow-hook-secret": secret })).status, 202);
  assert.equal((await ask(t, "DELETE", `${hooks}/ci`, { as: "admin" })).status, 204);
  assertError(await ask(t, "GET", `${hooks}/ci`, { as: "viewer" }), 404, /event hook ci not found in/);
  await refusedDelivery("a removed hook", () => deliver("ci", "{}", { "x-flow-hook-secret": secret }), 404, /no event hook ci in/);
});

test("a hook rotated or removed behind this process's back (another replica): the old secret is refused, the new one works at once", async () => {
  const first = await created("replica", { event_type: "replica.fired" });
  assert.equal((await deliver("replica", "{}", { "x-flow-hook-secret": first })).status, 202, "the hook is now in memory");
  const rotated = mintHookSecret();
  await t.db.pool.query(`update event_hooks set secret_digest = $1 where name = 'replica'`, [rotated.digest]);
  await refusedDelivery(
    "the secret it was rotated from",
    () => deliver("replica", "{}", { "x-flow-hook-secret": first }),
    401,
    /the secret sent is not the secret of event hook replica/,
  );
  const accepted = await deliver("replica", `{"n":2}`, { "x-flow-hook-secret": rotated.secret });
  assert.equal(accepted.status, 202, `the new secret, though the memory held the old one: ${accepted.text}`);
  await t.db.pool.query(`delete from event_hooks where name = 'replica'`);
  await refusedDelivery(
    "a removed hook",
    () => deliver("replica", "{}", { "x-flow-hook-secret": rotated.secret }),
    404,
    /no event hook replica in/,
  );
});

test("hook management refuses callers: no token, a forged token, a member writing, a non-member", async () => {
  await created("kept", { event_type: "kept.x" });
  await assertCallerRefusals(t, { method: "GET", url: hooks }, "viewer");
  await assertCallerRefusals(t, { method: "GET", url: `${hooks}/kept` }, "viewer");
  await assertCallerRefusals(t, { method: "PUT", url: `${hooks}/other`, body: { event_type: "a.b" } }, "admin");
  await assertCallerRefusals(t, { method: "POST", url: `${hooks}/kept/rotate` }, "admin");
  await assertCallerRefusals(t, { method: "DELETE", url: `${hooks}/kept` }, "admin");
  assert.equal(await countRows(t, "event_hooks"), 1, "the refused writes changed nothing");
  assertError(
    await ask(t, "GET", `${t.other.base}/event-hooks/kept`, { as: "outsider" }),
    404,
    new RegExp(`event hook kept not found in ${t.other.org}/p`),
  );
  assertError(await ask(t, "POST", `${t.other.base}/event-hooks/kept/rotate`, { as: "outsider" }), 404, /event hook kept not found/);
  await refusedDelivery(
    "another project's hook",
    () => ask(t, "POST", `/api/v1/hooks/${t.other.org}/p/kept`, { as: "none", body: "{}" }),
    404,
    new RegExp(`no event hook kept in ${t.other.org}/p`),
  );
});

test("a bad hook configuration is a 400 that says which flags go together", async () => {
  const refusedSet = async (name: string, body: unknown, message: RegExp) => {
    const before = await countRows(t, "event_hooks");
    assertError(await ask(t, "PUT", `${hooks}/${name}`, { as: "admin", body }), 400, message, JSON.stringify(body));
    assert.equal(await countRows(t, "event_hooks"), before);
  };
  await refusedSet("h", {}, /^give --event-type <type> \(shared token\), --manifest <m> --key <k>, or --hmac-header <h> --hmac-key <k>$/);
  await refusedSet("h", { manifest: "github", hmac_key: "k" }, /^give either --manifest or --hmac-header\/--hmac-key, not both$/);
  await refusedSet(
    "h",
    { manifest: "github", key: "k", event_type: "a.b" },
    /^a manifest hook derives each delivery's type \(h\.<event>\); leave out --event-type$/,
  );
  await refusedSet("h", { manifest: "gitlab", key: "k" }, /^unknown manifest "gitlab"; the built-in manifests are: github$/);
  await refusedSet("h", { manifest: "github" }, /^--manifest github needs --key <signing_key>/);
  await refusedSet("h", { key: "k", event_type: "a.b" }, /^--key goes with --manifest/);
  await refusedSet("h", { hmac_header: "x-sig" }, /^a manual HMAC hook needs both --hmac-header and --hmac-key/);
  await refusedSet("h", { hmac_header: "bad header", hmac_key: "k" }, /^hmac_header: hmac_header must be an HTTP header name/);
  await refusedSet("h", { event_type: "run.failed" }, /^type: event type "run\.failed" is reserved/);
  await refusedSet("push", { event_type: "a.b" }, /^name: a hook name may not be a platform type or namespace/);
  await refusedSet("h%00", { event_type: "a.b" }, /^path parameter name holds a NUL character/);
  await refusedSet("h", { event_type: "a.b\ud800" }, /^body\.event_type holds a lone UTF-16 surrogate/);
  await refusedSet("h", `{"event_type":${deepJson(200)}}`, /is nested more than 128 levels deep/);
  await refusedSet(
    "h",
    `{"event_type":"a.b","hmac_prefix":1e400}`,
    /^body\.hmac_prefix is a number outside the range a JSON number can be stored in/,
  );
});

test("token hook deliveries: the secret in the header or the query; none, a wrong one, hostile bodies refused", async () => {
  const secret = await created("tok", { event_type: "tok.fired" });
  const byHeader = await deliver("tok", `{"n":1}`, { "x-flow-hook-secret": secret }, "?secret=not-read");
  assert.equal(byHeader.status, 202, "the header is the secret when it is sent; the query's is not read then");
  const accepted = await deliver("tok", `{"n":1}`, {}, `?a=1&a=2&secret=${encodeURIComponent(secret)}`);
  assert.equal(accepted.status, 202, accepted.text);
  const { event_id: eventId, event_type: type } = accepted.body as { event_id: string; event_type: string };
  assert.equal(type, "tok.fired");
  const { rows } = await t.db.pool.query<{ payload: unknown }>(`select payload from events where id = $1`, [eventId]);
  assert.deepEqual(rows[0]?.payload, { body: { n: 1 }, query: { a: "1" } }, "the secret is never kept, the first of a repeated name wins");
  await refusedDelivery(
    "no secret",
    () => deliver("tok", "{}"),
    401,
    /^no secret was sent; send the hook's secret in the X-Flow-Hook-Secret header/,
  );
  await refusedDelivery(
    "a wrong secret",
    () => deliver("tok", "{}", { "x-flow-hook-secret": "nope" }),
    401,
    /^the secret sent is not the secret of event hook tok/,
  );
  await refusedDelivery(
    "a NUL in the body",
    () => deliver("tok", `{"a":"\\u0000"}`, { "x-flow-hook-secret": secret }),
    400,
    /^body\.a holds a NUL character/,
  );
  await refusedDelivery(
    "a lone surrogate",
    () => deliver("tok", `{"\\udc00":1}`, { "x-flow-hook-secret": secret }),
    400,
    /lone UTF-16 surrogate/,
  );
  await refusedDelivery(
    "deep nesting",
    () => deliver("tok", deepJson(200), { "x-flow-hook-secret": secret }),
    400,
    /is nested more than 128 levels deep/,
  );
  await refusedDelivery(
    "a NUL in the query",
    () => deliver("tok", "{}", { "x-flow-hook-secret": secret }, "?a=%00"),
    400,
    /query parameter "a" holds a NUL character/,
  );
  await refusedDelivery(
    "broken percent-encoding in the path",
    () => ask(t, "POST", `/api/v1/hooks/${t.project.org}/p/tok%E0%A4%A`, { as: "none", body: "{}" }),
    400,
    /not valid percent-encoding/,
  );
  await refusedDelivery(
    "a body over 2 MiB",
    () => deliver("tok", Buffer.alloc(2 * 1024 * 1024 + 1, 0x20), { "x-flow-hook-secret": secret }),
    413,
    /the limit for POST .* is 2 MiB/,
  );
  const text = await deliver("tok", "not json", { "x-flow-hook-secret": secret, "content-type": "text/plain" });
  assert.equal(text.status, 202, "any content type arrives verbatim");
});

test("a GitHub hook: deliveries signed with its key are shaped by the manifest; unsigned and missigned ones are 401s", async () => {
  await created("gh", { manifest: "github", key: GITHUB_KEY });
  const body = JSON.stringify({ ref: "refs/heads/main", repository: { full_name: "acme/web" }, sender: { login: "octo" } });
  const headers = (signature: string | undefined, delivery = "d-1") => ({
    "x-github-event": "push",
    "x-github-delivery": delivery,
    ...(signature === undefined ? {} : { "x-hub-signature-256": signature }),
  });
  const ok = await deliver("gh", body, headers(`sha256=${sign(GITHUB_KEY, body)}`));
  assert.equal(ok.status, 202, ok.text);
  assert.equal((ok.body as { event_type: string }).event_type, "gh.push");
  await refusedDelivery(
    "no signature",
    () => deliver("gh", body, headers(undefined, "d-2")),
    401,
    /^the delivery has no X-Hub-Signature-256 header: event hook gh takes deliveries signed with its key/,
  );
  await refusedDelivery(
    "a wrong signature",
    () => deliver("gh", body, headers(`sha256=${sign("other", body)}`, "d-3")),
    401,
    /^the X-Hub-Signature-256 signature does not match the body/,
  );
  const bad = `{"ref":"\\u0000"}`;
  await refusedDelivery(
    "a signed NUL",
    () => deliver("gh", bad, headers(`sha256=${sign(GITHUB_KEY, bad)}`, "d-4")),
    400,
    /holds a NUL character/,
  );
  await refusedDelivery(
    "no delivery id",
    () => deliver("gh", body, { "x-github-event": "push", "x-hub-signature-256": `sha256=${sign(GITHUB_KEY, body)}` }),
    400,
    /^the X-GitHub-Delivery header is missing or too long/,
  );
});

test("a manual HMAC hook: the configured header carries the signature of the raw body", async () => {
  await created("mac", { hmac_header: "X-Sig", hmac_key: "mac-key", hmac_prefix: "v1=" });
  const body = `{"x":1}`;
  const ok = await deliver("mac", body, { "x-sig": `v1=${sign("mac-key", body)}` });
  assert.deepEqual([ok.status, (ok.body as { event_type: string }).event_type], [202, "mac"]);
  await refusedDelivery(
    "no signature",
    () => deliver("mac", body),
    401,
    /^the x-sig header is missing or does not match the body under event hook mac's key/,
  );
  await refusedDelivery(
    "an unprefixed signature",
    () => deliver("mac", body, { "x-sig": sign("mac-key", body) }),
    401,
    /does not match the body/,
  );
});

test("a body that is not UTF-8 is a 400 naming the byte offset, after the secret or signature, recording nothing; a BOM and an emoji arrive verbatim", async () => {
  const secret = await created("bytes", { event_type: "bytes.in" });
  await created("bmac", { hmac_header: "X-Sig", hmac_key: "bmac-key" });
  await created("bgh", { manifest: "github", key: GITHUB_KEY });
  const hex = (h: string): Buffer => Buffer.from(h.replaceAll(" ", ""), "hex");
  const bad: Array<[string, Buffer, number]> = [
    ["a lone 0xFF", hex("41 ff 42"), 1],
    ["a multi-byte sequence cut at the end", Buffer.concat([Buffer.from('"euro '), hex("e2 82")]), 6],
    ["an overlong encoding of /", hex("c0 af"), 0],
    ["a UTF-16 surrogate encoded in UTF-8", hex("ed a0 80"), 0],
    [
      "a bad byte inside a JSON string, after a real U+FFFD",
      Buffer.concat([Buffer.from('{"a":"'), hex("ef bf bd ff"), Buffer.from('"}')]),
      9,
    ],
  ];
  for (const [what, body, offset] of bad) {
    const message = new RegExp(`^body is not valid UTF-8 at byte offset ${offset} \\(0x${body[offset]!.toString(16)}\\)`);
    await refusedDelivery(
      `token hook, ${what}`,
      () => deliver("bytes", body, { "x-flow-hook-secret": secret, "content-type": "text/plain" }),
      400,
      message,
    );
    await refusedDelivery(`HMAC hook, ${what}`, () => deliver("bmac", body, { "x-sig": sign("bmac-key", body) }), 400, message);
    const gh = {
      "x-github-event": "push",
      "x-github-delivery": `utf8-${offset}-${body.length}`,
      "x-hub-signature-256": `sha256=${sign(GITHUB_KEY, body)}`,
    };
    await refusedDelivery(`GitHub hook, ${what}`, () => deliver("bgh", body, gh), 400, message);
  }
  const form = (payload: string): Buffer => Buffer.from(`payload=${payload}`);
  const formHeaders = (body: Buffer, delivery: string) => ({
    "content-type": "application/x-www-form-urlencoded",
    "x-github-event": "push",
    "x-github-delivery": delivery,
    "x-hub-signature-256": `sha256=${sign(GITHUB_KEY, body)}`,
  });
  const badForm = form(encodeURIComponent('{"ref":"') + "%FF" + encodeURIComponent('"}'));
  await refusedDelivery(
    "a form payload whose escapes are not UTF-8",
    () => deliver("bgh", badForm, formHeaders(badForm, "f-1")),
    400,
    /^body: the form's payload field is not valid percent-encoding/,
  );
  const goodForm = form(encodeURIComponent(JSON.stringify({ ref: "refs/heads/\u{1F600}", repository: { full_name: "acme/web" } })));
  const took = await deliver("bgh", goodForm, formHeaders(goodForm, "f-2"));
  assert.equal(took.status, 202, took.text);
  const { rows: pushed } = await t.db.pool.query<{ payload: { body: { ref?: string } } }>(`select payload from events where id = $1`, [
    (took.body as { event_id: string }).event_id,
  ]);
  assert.equal(pushed[0]?.payload.body.ref, "refs/heads/\u{1F600}", "a form payload's escapes decode to the text sent");
  const notUtf8 = hex("ff fe 00");
  await refusedDelivery(
    "a wrong secret and bad bytes",
    () => deliver("bytes", notUtf8, { "x-flow-hook-secret": "nope" }),
    401,
    /^the secret sent/,
  );
  await refusedDelivery("a bad signature and bad bytes", () => deliver("bmac", notUtf8, { "x-sig": "0" }), 401, /does not match the body/);
  const stored = async (body: Buffer): Promise<unknown> => {
    const res = await deliver("bytes", body, { "x-flow-hook-secret": secret, "content-type": "text/plain" });
    assert.equal(res.status, 202, res.text);
    const { rows } = await t.db.pool.query<{ payload: { body: unknown } }>(`select payload from events where id = $1`, [
      (res.body as { event_id: string }).event_id,
    ]);
    return rows[0]?.payload.body;
  };
  assert.deepEqual(await stored(Buffer.from('{"e":"\u{1F600}"}')), { e: "\u{1F600}" }, "a 4-byte emoji is UTF-8");
  assert.equal(
    await stored(Buffer.concat([hex("ef bb bf"), Buffer.from('{"a":1}')])),
    '\uFEFF{"a":1}',
    "a BOM is kept: not JSON, the text verbatim",
  );
});
