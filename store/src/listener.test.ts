import { once } from "node:events";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { test } from "node:test";
import assert from "node:assert/strict";
import { startListener } from "./listener.js";
import { createTestDatabase, waitFor } from "./testing.js";

test("local() wakes this process's subscribers at once and drops the NOTIFY's echo, in either order; other notifications pass", async (t) => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  const listener = startListener(db.url, () => undefined);
  t.after(() => listener.close());
  const seen: string[] = [];
  listener.on("flowsvc_jobs", (p) => seen.push(p));
  const notify = (payload: string): Promise<unknown> => db.pool.query(`select pg_notify('flowsvc_jobs', $1)`, [payload]);
  /** Notifications of one connection arrive in commit order: once `mark` is seen, every earlier one was handled. */
  let marks = 0;
  const settle = async (): Promise<void> => {
    const mark = `mark-${++marks}`;
    await notify(mark);
    await waitFor(mark, () => seen.includes(mark), 10_000, 5);
  };
  // The listener is connected and listening once a probe comes through.
  await waitFor(
    "the listener to listen",
    async () => {
      await notify("probe");
      return seen.includes("probe");
    },
    30_000,
    20,
  );

  // local first: the subscriber is called synchronously; the echo is dropped.
  listener.local("flowsvc_jobs", "run-a");
  assert.deepEqual(
    seen.filter((p) => p === "run-a"),
    ["run-a"],
  );
  await notify("run-a");
  await settle();
  assert.deepEqual(
    seen.filter((p) => p === "run-a"),
    ["run-a"],
    "the echo of a local wake-up is not delivered again",
  );

  // the echo first: delivered once, and the late local() does nothing.
  await notify("run-b");
  await settle();
  listener.local("flowsvc_jobs", "run-b");
  assert.deepEqual(
    seen.filter((p) => p === "run-b"),
    ["run-b"],
  );

  // A later NOTIFY with the same payload (a wake of that run) is a new one: delivered.
  await notify("run-a");
  await settle();
  assert.deepEqual(
    seen.filter((p) => p === "run-a"),
    ["run-a", "run-a"],
  );
  // Payload-less nudges are never taken for an echo.
  await notify("");
  await settle();
  assert.ok(seen.includes(""));
});

test("an attempt to connect that fails after close() logs nothing and is not retried", async (t) => {
  // A peer that accepts and never answers: the listener's attempt stays under way until the socket goes.
  const sockets: Socket[] = [];
  const peer = createServer((s) => sockets.push(s));
  peer.listen(0, "127.0.0.1");
  await once(peer, "listening");
  t.after(() => peer.close());
  const logged: string[] = [];
  const listener = startListener(`postgres://u:p@127.0.0.1:${(peer.address() as AddressInfo).port}/db`, (msg) => logged.push(msg));
  await waitFor("the listener's attempt", () => sockets.length === 1, 10_000, 5);
  await listener.close();
  sockets[0]!.destroy();
  await once(sockets[0]!, "close");
  // The client sees the reset in the same process: a few turns of the loop, not a sleep.
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(logged, []);
  assert.equal(sockets.length, 1, "no new attempt after close()");
});
