import { test } from "node:test";
import assert from "node:assert/strict";
import { decideAfterRefresh, refreshAfterMs, retryDelaySecs, tokenLifetimeSecs, type RenewalContext } from "./renewal.js";

const ctx = (patch: Partial<RenewalContext> = {}): RenewalContext => ({
  nowMs: 1_000_000,
  attempts: 0,
  rotatesRefreshToken: true,
  assumedLifetimeSecs: undefined,
  refreshToken: "old-rt",
  random: 0,
  ...patch,
});

void test("renewal is planned from expires_in, else the provider's assumed lifetime, else never", () => {
  assert.equal(tokenLifetimeSecs(3600, 60), 3600);
  assert.equal(tokenLifetimeSecs(undefined, 7200), 7200);
  assert.equal(tokenLifetimeSecs(undefined, undefined), undefined);
  assert.equal(tokenLifetimeSecs(Number.POSITIVE_INFINITY, undefined), undefined, "a huge expires_in (1e400) is no lifetime");
  assert.equal(refreshAfterMs(0, 3600), 3300_000, "five minutes before a one-hour token expires");
  assert.equal(refreshAfterMs(0, 100), 80_000, "a fifth of a short lifetime");
  assert.equal(refreshAfterMs(0, undefined), undefined);
  const never = decideAfterRefresh({ kind: "renewed", tokens: { access_token: "a" } }, ctx());
  assert.deepEqual([never.status, never.refreshAfterMs, never.expiresAtMs, never.tokens?.refresh_token], ["active", null, null, "old-rt"]);
  const assumed = decideAfterRefresh(
    { kind: "renewed", tokens: { access_token: "a", refresh_token: "new" } },
    ctx({ assumedLifetimeSecs: 600 }),
  );
  assert.deepEqual([assumed.refreshAfterMs, assumed.tokens?.refresh_token], [1_000_000 + 480_000, "new"]);
});

void test("each outcome moves the account as the status table says", () => {
  assert.equal(decideAfterRefresh({ kind: "invalid_grant", detail: "x" }, ctx()).status, "needs_reauth");
  assert.equal(decideAfterRefresh({ kind: "unknown", detail: "x" }, ctx()).status, "in_doubt");
  assert.equal(decideAfterRefresh({ kind: "unknown", detail: "x" }, ctx({ rotatesRefreshToken: false })).status, "refreshing");
  for (const kind of ["not_sent", "provider_error"] as const) {
    const d = decideAfterRefresh({ kind, detail: "x" }, ctx({ attempts: 3 }));
    assert.deepEqual([d.status, d.attempts, d.refreshAfterMs], ["refreshing", 4, 1_000_000 + 40_000]);
  }
  assert.equal(retryDelaySecs(100, 0.99), 600 * 1.198);
});
