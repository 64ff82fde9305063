import { test } from "node:test";
import assert from "node:assert/strict";
import type { PoolClient } from "pg";
import { GroupCommitter, eachItem } from "./group-commit.js";
import { createTestDatabase, waitFor, type TestDatabase } from "./testing.js";

const scratch = async (t: { after(fn: () => Promise<void>): void }): Promise<TestDatabase> => {
  const db = await createTestDatabase();
  t.after(() => db.drop());
  await db.pool.query("create table gc (id int primary key, note text)");
  return db;
};

const insert = async (tx: PoolClient, id: number): Promise<number> => {
  await tx.query("insert into gc (id) values ($1)", [id]);
  return id;
};

const ids = async (db: TestDatabase): Promise<number[]> =>
  (await db.pool.query<{ id: number }>("select id from gc order by id")).rows.map((r) => r.id);

test("concurrent items share transactions, and each resolves only once its row is committed", async (t) => {
  const db = await scratch(t);
  const gc = new GroupCommitter(db.pool, eachItem(insert), { maxInFlight: 1, maxBatch: 64 });
  const seenCommitted: boolean[] = [];
  await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      gc.submit(i).then(async (id) => {
        // Another connection sees the row the moment the promise resolves: it was committed first.
        const { rows } = await db.pool.query("select 1 from gc where id = $1", [id]);
        seenCommitted.push(rows.length === 1);
      }),
    ),
  );
  assert.deepEqual(
    await ids(db),
    Array.from({ length: 20 }, (_, i) => i),
  );
  assert.ok(seenCommitted.every(Boolean));
  // The first item starts a batch alone (no added latency); the other 19 wait for it and go together.
  assert.equal(gc.stats.batches, 2);
  assert.equal(gc.stats.items, 20);
});

test("one sender at a time gets a batch of its own at once, without waiting for company", async (t) => {
  const db = await scratch(t);
  const gc = new GroupCommitter(db.pool, eachItem(insert));
  const started = performance.now();
  for (let i = 0; i < 5; i++) await gc.submit(i);
  assert.equal(gc.stats.batches, 5);
  assert.ok(performance.now() - started < 5_000);
  assert.deepEqual(await ids(db), [0, 1, 2, 3, 4]);
});

test("items that arrive in one turn while a batch commits go together in the next, though a second slot is free", async (t) => {
  const db = await scratch(t);
  const gc = new GroupCommitter(db.pool, eachItem(insert));
  const first = gc.submit(0);
  assert.equal(gc.stats.batches, 1, "an idle committer starts the first item's batch at once");
  // Two slots (the default): each of these could have started a batch of its own, and three commits would follow.
  const rest = [1, 2, 3].map((id) => gc.submit(id));
  assert.equal(gc.stats.batches, 1, "nothing else starts in the turn the items arrive in");
  assert.deepEqual(await Promise.all([first, ...rest]), [0, 1, 2, 3]);
  assert.deepEqual([gc.stats.batches, gc.stats.items], [2, 4]);
  assert.deepEqual(await ids(db), [0, 1, 2, 3]);
});

test("a failing item neither loses nor wrongly acknowledges the others in its batch", async (t) => {
  const db = await scratch(t);
  await db.pool.query("insert into gc (id) values (7)");
  const gc = new GroupCommitter(db.pool, eachItem(insert), { maxInFlight: 1 });
  // The first batch holds item 100 alone; 0..9 queue behind it and share one transaction, which the
  // duplicate 7 aborts: each is then retried alone.
  const outcomes = await Promise.allSettled([100, ...Array.from({ length: 10 }, (_, i) => i)].map((id) => gc.submit(id)));
  const rejected = outcomes.flatMap((o, i) => (o.status === "rejected" ? [{ i, err: o.reason as { code?: string } }] : []));
  assert.equal(rejected.length, 1);
  assert.equal(rejected[0]!.i, 8); // item 7
  assert.equal(rejected[0]!.err.code, "23505");
  assert.deepEqual(await ids(db), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100]);
  assert.equal(gc.stats.splitBatches, 1);
});

test("an item's error in a batch of one is its own answer, and nothing of it is written", async (t) => {
  const db = await scratch(t);
  const gc = new GroupCommitter(
    db.pool,
    eachItem(async (tx: PoolClient, id: number) => {
      await insert(tx, id);
      if (id === 3) throw new Error("refused after writing");
      return id;
    }),
  );
  await assert.rejects(gc.submit(3), /refused after writing/);
  assert.equal(await gc.submit(4), 4);
  assert.deepEqual(await ids(db), [4]);
});

test("with a linger, items arriving within it share one batch; close flushes what is queued", async (t) => {
  const db = await scratch(t);
  const gc = new GroupCommitter(db.pool, eachItem(insert), { lingerMs: 50 });
  const first = Promise.all([gc.submit(1), gc.submit(2), gc.submit(3)]);
  assert.deepEqual(await first, [1, 2, 3]);
  assert.equal(gc.stats.batches, 1);
  const late = gc.submit(4);
  await gc.close();
  assert.equal(await late, 4);
  await assert.rejects(gc.submit(5), /closed/);
  assert.deepEqual(await ids(db), [1, 2, 3, 4]);
});

test("a batch applier gets the whole batch in one call (one multi-row statement), and items alone after a failure", async (t) => {
  const db = await scratch(t);
  const calls: number[][] = [];
  const gc = new GroupCommitter(
    db.pool,
    async (tx: PoolClient, items: readonly number[]) => {
      calls.push([...items]);
      await tx.query("insert into gc (id) select unnest($1::int[])", [items]);
      return items.map((i) => i * 10);
    },
    { maxInFlight: 1 },
  );
  assert.deepEqual(await Promise.all([1, 2, 3, 4].map((i) => gc.submit(i))), [10, 20, 30, 40]);
  assert.deepEqual(calls, [[1], [2, 3, 4]]);
  calls.length = 0;
  const outcomes = await Promise.allSettled([5, 6, 2, 7].map((i) => gc.submit(i)));
  assert.deepEqual(
    outcomes.map((o) => o.status),
    ["fulfilled", "fulfilled", "rejected", "fulfilled"],
  );
  assert.deepEqual(calls, [[5], [6, 2, 7], [6], [2], [7]]);
  assert.deepEqual(await ids(db), [1, 2, 3, 4, 5, 6, 7]);
});

test("`begin` runs inside each batch's transaction, also when a failed batch is retried item by item", async (t) => {
  const db = await scratch(t);
  await db.pool.query("insert into gc (id) values (3)");
  const begins: number[][] = [];
  const seen = async (tx: PoolClient, id: number): Promise<string> => {
    await tx.query("insert into gc (id) values ($1)", [id]);
    return (await tx.query<{ v: string }>("select current_setting('flowsvc.batch', true) as v")).rows[0]!.v;
  };
  const gc = new GroupCommitter(db.pool, eachItem(seen), {
    maxInFlight: 1,
    begin: (items) => {
      begins.push([...items]);
      return `select set_config('flowsvc.batch', '${items.join("-")}', true)`;
    },
  });
  const outcomes = await Promise.allSettled([0, 1, 2, 3, 4].map((id) => gc.submit(id)));
  assert.deepEqual(
    outcomes.map((o) => (o.status === "fulfilled" ? o.value : "rejected")),
    ["0", "1", "2", "rejected", "4"],
  );
  assert.deepEqual(begins, [[0], [1, 2, 3, 4], [1], [2], [3], [4]]);
  const { rows } = await db.pool.query<{ v: string | null }>("select current_setting('flowsvc.batch', true) as v");
  assert.ok(!rows[0]!.v, "set_config(..., true) is local to the transaction it ran in");
});

test("order is kept: rows land in the order submitted, within and across batches, and each caller gets its own item's result", async (t) => {
  const db = await scratch(t);
  await db.pool.query("alter table gc add column at bigserial");
  const gc = new GroupCommitter(
    db.pool,
    async (tx: PoolClient, items: readonly number[]) => {
      // One multi-row INSERT per batch, in the batch's order (as emitEvents' unnest ... with ordinality).
      await tx.query("insert into gc (id) select id from unnest($1::int[]) with ordinality as t(id, ord) order by ord", [items]);
      return items.map((i) => `item ${i}`);
    },
    { maxInFlight: 1, maxBatch: 7 },
  );
  const order = Array.from({ length: 40 }, (_, i) => (i * 17) % 40);
  const results = await Promise.all(order.map((i) => gc.submit(i)));
  assert.deepEqual(
    results,
    order.map((i) => `item ${i}`),
  );
  const { rows } = await db.pool.query<{ id: number }>("select id from gc order by at");
  assert.deepEqual(
    rows.map((r) => r.id),
    order,
  );
  assert.ok(gc.stats.batches >= 6, `batches of at most 7: ${gc.stats.batches}`);
});

test("an item arriving while a batch commits waits for the next batch, and is answered only after that batch's commit", async (t) => {
  const db = await scratch(t);
  const blocker = await db.pool.connect();
  try {
    await midCommit(db, blocker);
  } finally {
    blocker.release();
  }
});

const midCommit = async (db: TestDatabase, blocker: PoolClient): Promise<void> => {
  await blocker.query("begin");
  await blocker.query("select pg_advisory_xact_lock(42)");
  // The first batch waits on the lock the test holds: it is "committing" for as long as the test wants.
  const gc = new GroupCommitter(
    db.pool,
    eachItem(async (tx: PoolClient, id: number) => {
      if (id === 1) await tx.query("select pg_advisory_xact_lock(42)");
      return insert(tx, id);
    }),
    { maxInFlight: 1 },
  );
  const settled = new Set<number>();
  const first = gc.submit(1).then((v) => settled.add(v));
  await waitFor(
    "the first batch waits for the lock",
    async () =>
      (
        await db.pool.query<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
        )
      ).rows[0]!.n > 0,
    10_000,
    10,
  );
  const late = [gc.submit(2).then((v) => settled.add(v)), gc.submit(3).then((v) => settled.add(v))];
  assert.equal(gc.stats.batches, 1, "no second batch while the only slot is busy");
  assert.equal(settled.size, 0, "nothing is answered before its batch committed");
  await blocker.query("commit");
  await first;
  await Promise.all(late);
  assert.deepEqual([...settled].sort(), [1, 2, 3]);
  assert.equal(gc.stats.batches, 2, "the two that arrived mid-commit went together in the next batch");
  assert.deepEqual(await ids(db), [1, 2, 3]);
};

test("`alone` commits a batch in one statement when it can; when it declines the batch goes through a transaction; when it fails each item is tried alone", async (t) => {
  const db = await scratch(t);
  const applied: number[][] = [];
  const gc = new GroupCommitter(
    db.pool,
    async (tx: PoolClient, items: readonly number[]) => {
      applied.push([...items]);
      await tx.query("insert into gc (id, note) select unnest($1::int[]), 'tx'", [items]);
      return items.map(() => "tx");
    },
    {
      maxInFlight: 1,
      alone: async (db2: PoolClient, items: readonly number[]) => {
        if (items.some((i) => i >= 100)) return undefined; // declined: nothing written
        // One autocommit statement: all of the batch or, on error, none of it.
        await db2.query("insert into gc (id, note) select unnest($1::int[]), 'alone'", [items]);
        return items.map(() => "alone");
      },
    },
  );
  assert.deepEqual(await Promise.all([1, 2, 3].map((i) => gc.submit(i))), ["alone", "alone", "alone"]);
  assert.deepEqual(applied, [], "a transaction was never opened");
  assert.deepEqual(await gc.submit(100), "tx");
  await db.pool.query("insert into gc (id) values (5)");
  // 5 is taken: the batch [4, 5, 6] fails alone as a whole (nothing of it written), then each is applied alone in a transaction.
  const blocker = gc.submit(7);
  const outcomes = await Promise.allSettled([4, 5, 6].map((i) => gc.submit(i)));
  assert.equal(await blocker, "alone");
  assert.deepEqual(
    outcomes.map((o) => (o.status === "fulfilled" ? o.value : (o.reason as { code?: string }).code)),
    ["tx", "23505", "tx"],
  );
  const { rows } = await db.pool.query<{ id: number; note: string | null }>("select id, note from gc order by id");
  assert.deepEqual(
    rows.map((r) => [r.id, r.note]),
    [
      [1, "alone"],
      [2, "alone"],
      [3, "alone"],
      [4, "tx"],
      [5, null],
      [6, "tx"],
      [7, "alone"],
      [100, "tx"],
    ],
  );
  assert.equal(gc.stats.alone, 3);
});
