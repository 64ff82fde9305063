/**
 * Property-based tests of hook ingest (issue 15, item 5) over app.inject(): any body, any headers,
 * signatures and secrets of every length, to a token hook, a manual HMAC hook and a GitHub hook.
 * Properties: no 5xx; a 202 recorded exactly one event and a refusal none; a refusal has a code and
 * says what was wrong; a correctly signed body Postgres cannot store is a 400 naming its place.
 * Seeded and bounded: a failure prints fast-check's seed and path, which replay it.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";
import fc from "fast-check";
import { ask, countRows, createTestApp, type Answer, type TestApp } from "../testing/test-app.js";

let t: TestApp;
let tokenSecret: string;
const HMAC_KEY = "fuzz-hmac-key";
const GITHUB_KEY = "fuzz-github-key";
const CASE_MS = 10_000;

before(async () => {
  t = await createTestApp({ publicUrl: "https://flow.example.com/" });
  const put = async (name: string, body: unknown): Promise<Answer> => {
    const res = await ask(t, "PUT", `${t.project.base}/event-hooks/${name}`, { as: "admin", body });
    assert.equal(res.status, 201, res.text);
    return res;
  };
  tokenSecret = ((await put("tok", { event_type: "fz.token" })).body as { secret: string }).secret;
  await put("mac", { event_type: "fz.mac", hmac_header: "x-sig", hmac_key: HMAC_KEY, hmac_prefix: "sha256=" });
  await put("gh", { manifest: "github", key: GITHUB_KEY });
});
after(() => t.close());

const hmac = (key: string, body: Buffer): string => createHmac("sha256", key).update(body).digest("hex");

const deliver = async (
  name: string,
  body: Buffer,
  headers: Record<string, string>,
  query = "",
): Promise<{ res: Answer; added: number }> => {
  const before = await countRows(t, "events");
  const t0 = performance.now();
  const res = await ask(t, "POST", `/api/v1/hooks/${t.project.org}/p/${name}${query}`, { as: "none", body, headers });
  assert.ok(performance.now() - t0 < CASE_MS, `the delivery to ${name} took over ${CASE_MS} ms`);
  return { res, added: (await countRows(t, "events")) - before };
};

/** No 5xx; a 202 recorded exactly one event, anything else none; a refusal has a code and a message. */
const assertDelivery = ({ res, added }: { res: Answer; added: number }, what: string): void => {
  assert.ok(res.status < 500, `${what}: answered ${res.status}: ${res.text.slice(0, 400)}`);
  if (res.status === 202) {
    assert.equal(added, 1, `${what}: a 202 recorded exactly one event`);
    return;
  }
  assert.equal(added, 0, `${what}: a ${res.status} recorded nothing`);
  assert.ok(
    res.error && res.error.code.length > 0 && res.error.message.length > 0,
    `${what}: a refusal says what: ${res.text.slice(0, 400)}`,
  );
};

const bodyBytes = fc.oneof(
  fc.uint8Array({ maxLength: 400 }).map((b) => Buffer.from(b)),
  fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v))),
  fc.string({ unit: "binary", maxLength: 200 }).map((s) => Buffer.from(s)),
  fc
    .constantFrom(
      '{"a":1e400}',
      '{"a":[-1e999]}',
      '{"a":"\\u0000"}',
      '{"a":"\\ud800"}',
      '{"k\\u0000":1}',
      "",
      "null",
      "{",
      "\u0000",
      '{"__proto__":{"x":1}}',
    )
    .map((s) => Buffer.from(s)),
  fc.nat({ max: 2000 }).map((n) => Buffer.from("[".repeat(n) + "]".repeat(n))),
);
/** Signatures of every length: hex of 0-80 characters, with and without the prefix, and raw text. */
const signature = fc.oneof(
  fc
    .string({ unit: fc.constantFrom(..."0123456789abcdefABCDEF"), maxLength: 80 })
    .chain((hex) => fc.constantFrom(hex, `sha256=${hex}`, `sha1=${hex}`)),
  fc.string({ maxLength: 100 }),
  fc.constant(""),
);
const HEADER_NAMES = [
  "content-type",
  "x-sig",
  "x-hub-signature-256",
  "x-github-event",
  "x-github-delivery",
  "x-flow-hook-secret",
  "x-other",
];
const headers = fc.dictionary(
  fc.constantFrom(...HEADER_NAMES),
  fc.oneof(
    signature,
    fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded", "push", "ping", "pull_request"),
  ),
  { maxKeys: 5 },
);
const hookName = fc.constantFrom("tok", "mac", "gh", "missing", "%00", "a".repeat(200));
const query = fc.oneof(fc.constant(""), fc.constantFrom("?secret=", "?secret=%00", "?secret=%ff", "?a=1&a=2", "?%", "?x=%ED%A0%80"));

void test("any delivery (body, headers, signature, secret, query) to any hook: no 5xx; 202 means one event, a refusal none and says what", async () => {
  await fc.assert(
    fc.asyncProperty(hookName, bodyBytes, headers, query, async (name, body, hs, q) => {
      // Headers carry only visible ASCII: strip what Node's HTTP parser would refuse before the app sees it.
      const clean = Object.fromEntries(Object.entries(hs).map(([k, v]) => [k, v.replace(/[^\x20-\x7e]/g, "")]));
      assertDelivery(await deliver(name, body, { "content-type": "application/json", ...clean }, q), `${name} ${q}`);
    }),
    { seed: 1531, numRuns: 80 },
  );
});

void test("a correctly authenticated delivery of any body: 202 with one event, or 400 naming the place, recording nothing", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom("tok", "mac", "gh"),
      bodyBytes,
      fc.constantFrom("push", "ping", "issues", ""),
      async (name, body, ghEvent) => {
        const hs: Record<string, string> = { "content-type": "application/json" };
        if (name === "tok") hs["x-flow-hook-secret"] = tokenSecret;
        if (name === "mac") hs["x-sig"] = `sha256=${hmac(HMAC_KEY, body)}`;
        if (name === "gh") {
          Object.assign(hs, { "x-hub-signature-256": `sha256=${hmac(GITHUB_KEY, body)}`, "x-github-delivery": randomUUID() });
          if (ghEvent) hs["x-github-event"] = ghEvent;
        }
        const d = await deliver(name, body, hs);
        assertDelivery(d, `${name} signed ${JSON.stringify(body.toString("utf8").slice(0, 100))}`);
        if (d.res.status !== 202) assert.equal(d.res.status === 400 || d.res.status === 413 || d.res.status === 415, true, d.res.text);
      },
    ),
    { seed: 1532, numRuns: 80 },
  );
});

void test("regression (fuzz): 1e400 in an emit or a hook payload is refused naming the path, and nothing is recorded", async () => {
  const before = await countRows(t, "events");
  const emit = await ask(t, "POST", `${t.project.base}/events`, { body: '{"type":"fz.big","payload":{"n":[1,1e400]}}' });
  assert.equal(emit.status, 400, emit.text);
  assert.match(emit.error?.message ?? "", /^body\.payload\.n\[1\] is a number outside the range/);
  const body = Buffer.from('{"deep":{"n":-1e400}}');
  const hook = await deliver("mac", body, { "content-type": "application/json", "x-sig": `sha256=${hmac(HMAC_KEY, body)}` });
  assert.equal(hook.res.status, 400, hook.res.text);
  assert.match(hook.res.error?.message ?? "", /^body\.deep\.n is a number outside the range/);
  assert.equal(await countRows(t, "events"), before, "nothing was recorded");
});
