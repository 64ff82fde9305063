import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError } from "./parsers.js";
import { formatCatalog, parseSinceFlag } from "./events.js";

void test("--since takes a duration back from now or an ISO 8601 time, and refuses anything else naming both forms", () => {
  assert.equal(parseSinceFlag("30m"), "30m");
  assert.equal(parseSinceFlag("2025-01-31T12:00:00Z"), "2025-01-31T12:00:00Z");
  assert.throws(
    () => parseSinceFlag("yesterday"),
    (e: unknown) => e instanceof InvalidArgumentError && /duration .* or an ISO 8601 time/.test(e.message),
  );
  assert.throws(() => parseSinceFlag("2025-13-45"), InvalidArgumentError);
});

void test("the catalog prints its three sections, and says so when a section is empty", () => {
  const text = formatCatalog(
    {
      platform: [{ type: "run.failed", description: "a run failed" }],
      declared: [],
      seen: [
        {
          type: "deploy.requested",
          key: "acme/web",
          last_seen_at: "2025-01-31T11:59:00Z",
          sample_payload: { ref: "main" },
          sample_omitted: false,
        },
        {
          type: "blob",
          key: null,
          event_id: "evt-1",
          last_seen_at: "2025-01-31T11:00:00Z",
          sample_payload: null,
          payload_bytes: 3_000_000,
          sample_omitted: true,
        },
      ],
    },
    new Date("2025-01-31T12:00:00Z"),
  );
  assert.match(text, /PLATFORM TYPE +DESCRIPTION\nrun\.failed +a run failed\n/);
  assert.match(text, /DECLARED BY GRAPHS\n\(none: no stored graph declares an event type\)\n/);
  assert.match(text, /deploy\.requested +1m ago +acme\/web +\{"ref":"main"\}\n/);
  assert.match(text, /blob +1h ago +- +\(3000000 bytes: flow events show evt-1\)\n/);
});
