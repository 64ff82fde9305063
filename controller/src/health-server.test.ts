/**
 * The controller's health server (health-server.ts) on 127.0.0.1 with a test database: liveness,
 * readiness, and `/metrics` in Prometheus's text format with the queue read from Postgres.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { Server } from "node:http";
import { createTestDatabase, type TestDatabase } from "@flowsvc/store";
import { startHealthServer } from "./health-server.js";

let db: TestDatabase;
let server: Server;
let base: string;
before(async () => {
  db = await createTestDatabase();
  server = await startHealthServer({ pool: db.pool, host: "127.0.0.1", port: 0, logger: { info: () => undefined } });
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
after(async () => {
  await new Promise((resolve) => server.close(resolve));
  await db.drop();
});

test("the controller answers /healthz, /readyz and /metrics, and 404 names the three", async () => {
  assert.deepEqual(await (await fetch(`${base}/healthz`)).json(), { ok: true });
  assert.deepEqual(await (await fetch(`${base}/readyz`)).json(), { ok: true });
  const metrics = await fetch(`${base}/metrics`);
  assert.equal(metrics.status, 200);
  assert.match(metrics.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  const text = await metrics.text();
  assert.match(text, /^flowsvc_queue_depth 0$/m);
  assert.match(text, /^flowsvc_runs\{status="queued",trigger="other"\} 0$/m);
  assert.match(text, /^flowsvc_postgres_pool_connections\{state="total"\} \d+$/m);
  assert.match(text, /^process_cpu_seconds_total /m);
  const other = await fetch(`${base}/metrics/../secrets`);
  assert.equal(other.status, 404);
  assert.match(await other.text(), /GET \/healthz, \/readyz or \/metrics/);
});
