/**
 * Property-based tests of every /api/v1 route (issue 15, item 5) over app.inject() on a real test
 * Postgres: hostile bodies, path parameters and query strings. Properties: no 5xx; a refusal (4xx)
 * has a code and a message that says what was wrong; a refused request wrote nothing (row counts of
 * every table it could write are the same after it); each case answers within a bound. Seeded and
 * bounded: a failure prints fast-check's seed and path, which replay it.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { ask, createTestApp, type Answer, type TestApp } from "../testing/test-app.js";

let t: TestApp;
before(async () => {
  t = await createTestApp({ publicUrl: "https://flow.example.com/" });
});
after(() => t.close());

const CASE_MS = 10_000;
const RUNS_PER_ROUTE = 15;
const WRITTEN = [
  "runs",
  "jobs",
  "journal",
  "events",
  "signals",
  "secrets",
  "handlers",
  "event_hooks",
  "api_tokens",
  "accounts",
  "oauth_states",
];

const counts = async (): Promise<Record<string, number>> => {
  const sql = `select ${WRITTEN.map((n) => `(select count(*) from ${n})::int as ${n}`).join(", ")}`;
  return (await t.db.pool.query<Record<string, number>>(sql)).rows[0]!;
};

/** Percent-encodes every byte but the unreserved ones (a lone surrogate becomes U+FFFD first: encodeURIComponent throws on it). */
const pct = (s: string): string =>
  Array.from(Buffer.from(s, "utf8"), (b) =>
    /[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, "0")}`,
  ).join("");

/** Strings a hostile client sends: NUL, lone surrogates, percent-encoding, traversal, huge numbers in text. */
const HOSTILE = [
  "",
  " ",
  "\u0000",
  "\ud800",
  "\udc00x",
  "%00",
  "%ff",
  "%",
  "../..",
  "..",
  "a/b",
  "a\\b",
  "LD_PRELOAD",
  "1e400",
  "-1",
  "0x10",
];
const text = fc.oneof(
  fc.constantFrom(...HOSTILE),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.nat({ max: 5000 }).map((n) => "x".repeat(n)),
);
const scalar = fc.oneof(text, fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.constantFrom(1e308, -0, 2 ** 63));
const value: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: scalar },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.dictionary(text, scalar, { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

/** Raw body texts no JSON encoder would write: 1e400, broken JSON, deep nesting, raw NUL. */
const rawBody = fc.oneof(
  fc.constantFrom(
    '{"payload":1e400}',
    '{"a":-1e999}',
    "{",
    "[]",
    "null",
    '"x"',
    '{"a":"\\ud800"}',
    '{"a":"\\u0000"}',
    "\u0000",
    "{}garbage",
  ),
  fc.nat({ max: 3000 }).map((n) => "[".repeat(n) + "]".repeat(n)),
  fc.string({ unit: "binary", maxLength: 100 }),
);

/** A body shaped like the route's: its own keys (with hostile values), sometimes plus an unknown key. */
const shaped = (keys: string[]): fc.Arbitrary<unknown> =>
  fc.record(Object.fromEntries([...keys, "unknown_key"].map((k) => [k, value])), { requiredKeys: [] });

const bodyFor = (keys: string[]): fc.Arbitrary<unknown> =>
  fc.oneof(
    { weight: 4, arbitrary: shaped(keys) },
    { weight: 2, arbitrary: value },
    { weight: 2, arbitrary: rawBody },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );

/** A path segment: a fine name, hostile text percent-encoded, or raw percent-escapes (some invalid). */
const segment = fc.oneof(
  fc.constantFrom("p", "ci", "deploy", "run_1", "A".repeat(300)),
  text.map(pct),
  fc.constantFrom("%00", "%ff", "%zz", "%", "%2e%2e", "%2F", ".", "..", "%C0%AF", "%ED%A0%80"),
);

const query = fc.oneof(
  fc.constant(""),
  fc.dictionary(fc.constantFrom("limit", "status", "tag", "type", "key", "since", "after", "follow", "x"), text, { maxKeys: 4 }).map(
    (q) =>
      `?${Object.entries(q)
        .map(([k, v]) => `${k}=${pct(v)}`)
        .join("&")}`,
  ),
  fc.constantFrom("?limit=1e400", "?limit=-1", "?limit=%00", "?%", "?a=%zz", "?limit=1&limit=2", "?since=%ED%A0%80", "?&&=&"),
);

interface Route {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** Path with `{org}`/`{project}` filled and `:x` parts fuzzed. */
  path: string;
  keys?: string[];
}

const RUN_KEYS = ["kind", "source", "filename", "interpreter", "env", "idempotency_key", "tags", "retry"];
const ROUTES: Route[] = [
  { method: "GET", path: "/api/v1/whoami" },
  { method: "POST", path: "{base}/runs", keys: RUN_KEYS },
  { method: "GET", path: "{base}/runs" },
  { method: "GET", path: "{base}/runs/:id" },
  { method: "GET", path: "{base}/runs/:id/steps" },
  { method: "GET", path: "{base}/runs/:id/log" },
  { method: "POST", path: "{base}/runs/:id/signals/:name", keys: ["payload"] },
  { method: "POST", path: "{base}/runs/:id/cancel", keys: [] },
  { method: "POST", path: "{base}/runs/:id/rerun", keys: ["from"] },
  { method: "POST", path: "{base}/events", keys: ["type", "key", "payload"] },
  { method: "GET", path: "{base}/events" },
  { method: "GET", path: "{base}/events/catalog" },
  { method: "GET", path: "{base}/events/:id" },
  { method: "GET", path: "{base}/handlers" },
  { method: "GET", path: "{base}/handlers/:name" },
  { method: "PUT", path: "{base}/handlers/:name", keys: ["on", "when", "reaction", "tags", "credentials"] },
  { method: "DELETE", path: "{base}/handlers/:name" },
  { method: "GET", path: "{base}/event-hooks" },
  { method: "GET", path: "{base}/event-hooks/:name" },
  { method: "PUT", path: "{base}/event-hooks/:name", keys: ["event_type", "manifest", "key", "hmac_header", "hmac_key", "hmac_prefix"] },
  { method: "POST", path: "{base}/event-hooks/:name/rotate", keys: [] },
  { method: "DELETE", path: "{base}/event-hooks/:name" },
  { method: "GET", path: "{base}/secrets" },
  { method: "GET", path: "{base}/secrets/:name" },
  { method: "PUT", path: "{base}/secrets/:name", keys: ["value"] },
  { method: "DELETE", path: "{base}/secrets/:name" },
  { method: "GET", path: "{base}/accounts" },
  { method: "POST", path: "{base}/accounts/connect", keys: ["name", "provider", "session_id"] },
  { method: "DELETE", path: "{base}/accounts/:name" },
  { method: "GET", path: "/oauth/callback" },
];

const fill = (path: string, segs: string[], org: string, project: string): string => {
  let i = 0;
  return path.replace("{base}", `/api/v1/orgs/${org}/projects/${project}`).replace(/:[a-z]+/g, () => segs[i++] ?? "x");
};

/** The answer's properties: no 5xx, a refusal says what and has a code, a refusal wrote nothing. */
const assertAnswer = (res: Answer, what: string, before: Record<string, number>, after: Record<string, number>): void => {
  assert.ok(res.status < 500, `${what}: answered ${res.status}: ${res.text.slice(0, 400)}`);
  if (res.status < 400) return;
  assert.ok(res.error, `${what}: a ${res.status} has an error body: ${res.text.slice(0, 400)}`);
  assert.ok(res.error.code.length > 0, `${what}: a refusal has a code`);
  assert.ok(res.error.message.length > 0, `${what}: a refusal says what was wrong`);
  assert.deepEqual(after, before, `${what}: a refused request wrote nothing (answered ${res.status} ${res.error.message})`);
};

const caller = fc.constantFrom<"admin" | "member" | "viewer" | "none">("admin", "admin", "admin", "member", "viewer", "none");

for (const [i, route] of ROUTES.entries()) {
  void test(`${route.method} ${route.path}: hostile body, path and query answer below 500, and a refusal says what and writes nothing`, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          segs: fc.array(segment, { minLength: 2, maxLength: 2 }),
          org: fc.oneof(fc.constant("own"), fc.constant("own"), segment),
          q: query,
          body: bodyFor(route.keys ?? []),
          as: caller,
        }),
        async ({ segs, org, q, body, as }) => {
          const project = org === "own" ? "p" : segs[0]!;
          const url = fill(route.path, segs, org === "own" ? t.project.org : org, project) + q;
          const what = `${route.method} ${url} as ${as} with ${JSON.stringify(body)?.slice(0, 200)}`;
          const before = await counts();
          const t0 = performance.now();
          const res = await ask(t, route.method, url, { as, ...(route.keys ? { body } : {}) });
          assert.ok(performance.now() - t0 < CASE_MS, `${what}: took over ${CASE_MS} ms`);
          assertAnswer(res, what, before, await counts());
        },
      ),
      { seed: 1520 + i, numRuns: RUNS_PER_ROUTE },
    );
  });
}
