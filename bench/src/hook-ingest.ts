/**
 * Hook ingest throughput: deliveries accepted per second (each 202 sent only after its event
 * committed, fsync on) at 1 and at 32 concurrent senders, beside a plain single-row INSERT loop
 * (autocommit, one client) against the same Postgres in the same run. Targets (issue 15 item 2):
 * 1 sender at least 0.9x the one-HTTP-round-trip-plus-one-commit ceiling, 32 senders at least 3x
 * the insert loop (deliveries are committed in groups). For context, 64 senders against the same
 * server (more throughput there than at 32 means that at 32 the waits in each delivery's cycle, not
 * the capacity, set the rate) and the share of the cores the three processes kept busy.
 *
 * The server is `flow server` on its embedded, durable Postgres (as `npm start` runs it); the
 * insert loop connects to that same Postgres with the password and port from the data dir. The
 * loop writes to an ordinary (logged) table: a TEMP table skips the WAL flush at commit, so it
 * would compare a non-durable insert with a durable delivery (its rate is printed for reference).
 *
 * Usage: node bench/dist/hook-ingest.js [deliveries per scenario and round, default 2000]
 */
import { readFileSync, readdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { Pool } from "undici";
import type { TestServer } from "@flowsvc/test/support/server";
import { median, startBenchServer } from "./support.js";

const COUNT = Number(process.argv[2] ?? 2000);
const BODY = JSON.stringify({ ref: "refs/heads/main", sha: "8f3c2a1b9d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a", repo: "acme/web", n: 1 });

const databaseUrl = async (server: TestServer): Promise<string> => {
  const port = /embedded Postgres on 127\.0\.0\.1:(\d+)/.exec(server.output())?.[1];
  if (!port) throw new Error(`the server banner names no embedded Postgres port:\n${server.output()}`);
  const password = (await readFile(join(server.dataDir, "pg-password"), "utf8")).trim();
  return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/flowsvc`;
};

type Cpu = { server: number; postgres: number; senders: number };

/**
 * CPU seconds so far of one process (utime + stime) and of its reaped children (cutime + cstime),
 * from /proc (Linux; undefined elsewhere or once the process is gone).
 */
const processCpu = (pid: number): { own: number; children: number } | undefined => {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // fields from the state on; times in clock ticks
  return { own: (Number(f[11]) + Number(f[12])) / 100, children: (Number(f[13]) + Number(f[14])) / 100 };
};

/** Every process on the host: its parent and its command line (Linux; undefined elsewhere). */
const processTable = (): Map<number, { ppid: number; cmd: string }> | undefined => {
  let names: string[];
  try {
    names = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return undefined;
  }
  const table = new Map<number, { ppid: number; cmd: string }>();
  for (const pid of names) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      table.set(Number(pid), { ppid, cmd: readFileSync(`/proc/${pid}/cmdline`, "utf8") });
    } catch {
      // gone meanwhile
    }
  }
  return table;
};

/** The processes under `root` (its children, theirs, ...). */
const descendants = (table: Map<number, { ppid: number; cmd: string }>, root: number): number[] => {
  const children = new Map<number, number[]>();
  for (const [pid, { ppid }] of table) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  const out: number[] = [];
  const stack = [root];
  while (stack.length > 0) {
    const next = children.get(stack.pop()!) ?? [];
    out.push(...next);
    stack.push(...next);
  }
  return out;
};

/**
 * CPU seconds so far of the bench's server, its embedded Postgres and this process (the senders),
 * from /proc (Linux; undefined elsewhere). Only this bench's own processes count: the server and
 * the Postgres under it, not another `flow server` or Postgres that shares the host. Exited
 * processes drop out, so take it around a steady scenario.
 */
const cpuNow = (server: TestServer): Cpu | undefined => {
  const table = processTable();
  const root = server.process.pid;
  if (!table || root === undefined) return undefined;
  const out: Cpu = { server: processCpu(root)?.own ?? 0, postgres: 0, senders: processCpu(process.pid)?.own ?? 0 };
  for (const pid of descendants(table, root)) {
    if (!table.get(pid)!.cmd.includes("postgres")) continue; // its agents
    const cpu = processCpu(pid);
    // Plus its reaped children's: the postmaster's backends and autovacuum workers, so one that
    // exits between two readings does not take its CPU with it.
    if (cpu) out.postgres += cpu.own + cpu.children;
  }
  return out;
};

/** Microseconds of CPU per delivery between two readings. */
const cpuPer = (a: Cpu | undefined, b: Cpu | undefined, count: number): Cpu | undefined =>
  a && b
    ? {
        server: ((b.server - a.server) * 1e6) / count,
        postgres: ((b.postgres - a.postgres) * 1e6) / count,
        senders: ((b.senders - a.senders) * 1e6) / count,
      }
    : undefined;

/** Rows per second of `insert into <table> values (...)`, one at a time, autocommit. */
const insertLoop = async (client: pg.Client, table: string, count: number): Promise<number> => {
  const started = performance.now();
  for (let i = 0; i < count; i++) await client.query(`insert into ${table} (payload) values ($1)`, [BODY]);
  return count / ((performance.now() - started) / 1000);
};

/**
 * One events row and one commit, as a lone delivery's batch is (migration 019's
 * flowsvc_record_events_alone, called in autocommit), prepared as the server's pool prepares it.
 */
const eventRow = (() => {
  let project: { id: string; rev: string } | undefined;
  let n = 0;
  const payload = JSON.stringify({ body: JSON.parse(BODY) as unknown, query: {} });
  return async (client: pg.Client): Promise<void> => {
    project ??= (
      await client.query<{ id: string; rev: string }>("select id, handlers_rev::text as rev from projects where name = 'default' limit 1")
    ).rows[0]!;
    await client.query({
      name: "bench-event-row",
      text: "select flowsvc_record_events_alone('{1}'::bigint[], $1, $2, '{bench.direct}', '{NULL}', $3, '{NULL}', '{NULL}', '{NULL}', '{t}', '{NULL}'::uuid[], $4::bigint[])",
      values: [[`evt-direct-${process.pid}-${n++}`], [project.id], [payload], [project.rev]],
    });
  };
})();

/**
 * Deliveries per second of the database alone, one client: eventRow in a loop. An events row
 * costs more than the plain loop's (more indexes, a larger row, the checks): this is the floor of
 * a delivery's database part, with no HTTP and no server.
 */
const eventRowLoop = async (client: pg.Client, count: number): Promise<number> => {
  await eventRow(client);
  const started = performance.now();
  for (let i = 0; i < count; i++) await eventRow(client);
  return count / ((performance.now() - started) / 1000);
};

/**
 * Postgres CPU per event row at its cheapest: 16-row INSERTs (one commit each) into a copy of
 * `events` with its indexes, nothing else, read from the client's own backend. No ingest can make
 * Postgres spend less per delivery.
 */
const bareRowCpu = async (client: pg.Client, rows: number): Promise<number | undefined> => {
  await client.query("create table bench_events (like events including all)");
  const batch = 16;
  const payload = JSON.stringify({ body: JSON.parse(BODY) as unknown, query: {} });
  let n = 0;
  const insert = () =>
    client.query(
      "insert into bench_events (id, project_id, type, payload, trusted) select *, true from unnest($1::text[], $2::text[], $3::text[], $4::jsonb[])",
      [
        Array.from({ length: batch }, () => `evt-bench-${n++}`),
        Array(batch).fill("prj"),
        Array(batch).fill("bench.delivery"),
        Array(batch).fill(payload),
      ],
    );
  for (let i = 0; i < 20; i++) await insert();
  const backend = (await client.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
  const c0 = processCpu(backend)?.own;
  for (let i = 0; i < rows / batch; i++) await insert();
  const c1 = processCpu(backend)?.own;
  return c0 === undefined || c1 === undefined ? undefined : ((c1 - c0) * 1e6) / rows;
};

/** Where deliveries go, and the status each must be answered with (202 unless said). */
interface IngestTarget {
  readonly path: string;
  readonly secret: string;
  readonly expect?: number;
}

/** The HTTP floor: an unrouted path, answered 404 with no database work. */
const UNROUTED: IngestTarget = { path: "/bench-unrouted", secret: "", expect: 404 };

/** One POST of the bench's body to `target` on `http`; answers whether it got the status expected. */
const post = async (http: Pool, { path, secret, expect = 202 }: IngestTarget): Promise<boolean> => {
  const res = await http.request({
    path,
    method: "POST",
    headers: { "x-flow-hook-secret": secret, "content-type": "application/json" },
    body: BODY,
  });
  await res.body.dump();
  return res.statusCode === expect;
};

/** Accepted deliveries per second with `senders` concurrent senders sharing `count` deliveries. */
const ingest = async (server: TestServer, target: IngestTarget, senders: number, count: number): Promise<number> => {
  const http = new Pool(server.url, { connections: senders, pipelining: 1 });
  let next = 0;
  let refused = 0;
  const sender = async (): Promise<void> => {
    while (next < count) {
      next++;
      if (!(await post(http, target))) refused++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: senders }, sender));
  const rate = count / ((performance.now() - started) / 1000);
  await http.close();
  if (refused > 0) throw new Error(`${refused} of ${count} deliveries were not accepted`);
  return rate;
};

/** Milliseconds per operation of each part of the interleaved comparison (`many`: per delivery of a 32-sender burst). */
interface LoneTimes {
  delivery: number;
  floor: number;
  plain: number;
  row: number;
  many: number;
}

/** Deliveries in each 32-sender burst of the interleaved comparison, per block of the other kinds. */
const MANY_PER_BLOCK = 8;

/**
 * One sender against its ceiling, measured at the same moments: blocks of `block` deliveries, HTTP
 * floor requests (the 404), plain INSERTs and events-row calls, one kind after the other, repeated
 * until `count` of each, each round starting at the next kind; and a 32-sender burst of
 * MANY_PER_BLOCK x `block` deliveries among them. This disk's commit time moves by 2-10x from one
 * second to the next, so timing the ceiling's parts in phases of their own (as the rounds do)
 * compares a delivery with a commit of another moment; interleaved in blocks, each kind sees the
 * same disk.
 */
const loneInterleaved = async (
  server: TestServer,
  client: pg.Client,
  { hook, count, block }: { hook: IngestTarget; count: number; block: number },
): Promise<LoneTimes> => {
  const http = new Pool(server.url, { connections: 1, pipelining: 1 });
  const http32 = new Pool(server.url, { connections: 32, pipelining: 1 });
  const burst = async (): Promise<void> => {
    let next = 0;
    const sender = async (): Promise<void> => {
      while (next++ < MANY_PER_BLOCK * block) if (!(await post(http32, hook))) throw new Error("a delivery was not accepted");
    };
    await Promise.all(Array.from({ length: 32 }, sender));
  };
  await burst(); // its 32 connections
  const spent: LoneTimes = { delivery: 0, floor: 0, plain: 0, row: 0, many: 0 };
  const ops: Record<keyof LoneTimes, () => Promise<unknown>> = {
    delivery: async () => {
      if (!(await post(http, hook))) throw new Error("a delivery was not accepted");
    },
    floor: () => post(http, UNROUTED),
    plain: () => client.query("insert into bench_plain_insert (payload) values ($1)", [BODY]),
    row: () => eventRow(client),
    many: burst,
  };
  try {
    const kinds = Object.keys(ops) as Array<keyof LoneTimes>;
    // Each block starts the round at the next kind, so each follows every other as often (a burst leaves
    // work behind in Postgres that would otherwise always fall on the same kind).
    for (let done = 0, b = 0; done < count; done += block, b++)
      for (const kind of [...kinds.slice(b % kinds.length), ...kinds.slice(0, b % kinds.length)]) {
        const started = performance.now();
        for (let i = 0; i < (kind === "many" ? 1 : block); i++) await ops[kind]();
        spent[kind] += performance.now() - started;
      }
  } finally {
    await http.close();
    await http32.close();
  }
  const n = Math.ceil(count / block) * block;
  return {
    delivery: spent.delivery / n,
    floor: spent.floor / n,
    plain: spent.plain / n,
    row: spent.row / n,
    many: spent.many / (n * MANY_PER_BLOCK),
  };
};

const setHook = async (server: TestServer): Promise<{ path: string; secret: string }> => {
  const res = await fetch(`${server.url}/api/v1/orgs/default/projects/default/event-hooks/bench`, {
    method: "PUT",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: JSON.stringify({ event_type: "bench.delivery" }),
  });
  const hook = (await res.json()) as { ingest_url: string; secret: string };
  if (res.status !== 201) throw new Error(`event-hook set: HTTP ${res.status} ${JSON.stringify(hook)}`);
  return { path: new URL(hook.ingest_url).pathname, secret: hook.secret };
};

const rate = (r: number): string => `${Math.round(r).toString().padStart(6)} /s`;

/** What the CPU per delivery at 32 senders allows on this host's cores, beside the HTTP floor's and a bare row's. */
const printCpu = ({
  many,
  floor,
  bareRow,
  base,
  manyRate,
}: {
  many: Cpu;
  floor: Cpu;
  bareRow: number | undefined;
  base: number;
  manyRate: number;
}): void => {
  const f = rate;
  const us = (c: Cpu): string => `${Math.round(c.server)} / ${Math.round(c.postgres)} / ${Math.round(c.senders)} us`;
  // Client, server and Postgres share this machine's cores: what their CPU per delivery allows.
  const cores = availableParallelism();
  const cap = (c: Cpu): number => (cores * 1e6) / (c.server + c.postgres + c.senders);
  console.log(`    CPU per delivery at 32 senders (server / Postgres / senders), last round: ${us(many)}; the HTTP floor: ${us(floor)}`);
  console.log(
    `    on ${cores} cores that CPU allows at most ${f(cap(many))} (${(cap(many) / base).toFixed(2)}x); the floor's alone ${f(cap(floor))} (${(cap(floor) / base).toFixed(2)}x)`,
  );
  // What the three used of the cores in that round: short of 100%, the rest idled in waits (a batch's answer unread, a commit's flush), not in work.
  const busy = (manyRate * (many.server + many.postgres + many.senders)) / 1e6 / cores;
  console.log(`    in that round (${f(manyRate)}) server, Postgres and senders kept ${Math.round(busy * 100)}% of the ${cores} cores busy`);
  if (bareRow !== undefined) {
    const best = cap({ ...floor, postgres: floor.postgres + bareRow });
    console.log(
      `    Postgres CPU per row of a bare 16-row INSERT into a copy of events: ${Math.round(bareRow)} us; with the floor, the best any ingest could do here: ${f(best)} (${(best / base).toFixed(2)}x)`,
    );
  }
};

/** The plain INSERT loop's table, and a TEMP one (no WAL flush at commit) for reference. */
const createInsertTables = async (client: pg.Client): Promise<void> => {
  await client.query(
    "create table bench_plain_insert (id bigserial primary key, payload jsonb not null, at timestamptz not null default now())",
  );
  await client.query(
    "create temp table bench_temp_insert (id bigserial primary key, payload jsonb not null, at timestamptz not null default now())",
  );
};

const ROUNDS = 3;
/** Operations of each kind in one block of the interleaved comparison. */
const LONE_BLOCK = 25;

/** The interleaved comparison's figures: each kind timed in blocks at the same moments as the others. */
const printInterleaved = (t: LoneTimes, block: number): void => {
  const ms = (x: number): string => `${x.toFixed(3)} ms`;
  console.log(
    `  interleaved (blocks of ${block} of each kind, one after the other, so each sees the disk of the same moment): per operation, delivery at 1 sender ${ms(t.delivery)}, HTTP floor ${ms(t.floor)}, plain INSERT ${ms(t.plain)}, events row ${ms(t.row)}; per delivery of a 32-sender burst ${ms(t.many)}`,
  );
  console.log(
    `    1 sender: ${(((t.floor + t.plain) / t.delivery) * 1).toFixed(2)}x of the one-round-trip-plus-one-commit ceiling (target >= 0.9x), ${((t.floor + t.row) / t.delivery).toFixed(2)}x of the events-row ceiling; the delivery beyond the floor and the events row: ${ms(t.delivery - t.floor - t.row)}`,
  );
  console.log(`    32 senders: ${(t.plain / t.many).toFixed(2)}x the plain INSERT loop (target >= 3x)`);
};

const main = async (): Promise<void> => {
  const load0 = loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
  const server = await startBenchServer();
  const client = new pg.Client(await databaseUrl(server));
  try {
    await client.connect();
    await createInsertTables(client);
    const hook = await setHook(server);
    await ingest(server, hook, 8, 400); // warm-up: JIT, pool connections, plans
    await insertLoop(client, "bench_plain_insert", 400);

    // Rounds interleave the scenarios, so load from other processes on the host hits all of them alike.
    const plain: number[] = [];
    const direct: number[] = [];
    const one: number[] = [];
    const [many, many64]: [number[], number[]] = [[], []];
    const floor1: number[] = [];
    const floor32: number[] = [];
    let manyCpu: Cpu | undefined;
    let floorCpu: Cpu | undefined;
    for (let r = 0; r < ROUNDS; r++) {
      plain.push(await insertLoop(client, "bench_plain_insert", COUNT));
      direct.push(await eventRowLoop(client, COUNT));
      one.push(await ingest(server, hook, 1, COUNT));
      const c0 = cpuNow(server);
      many.push(await ingest(server, hook, 32, COUNT));
      manyCpu = cpuPer(c0, cpuNow(server), COUNT);
      many64.push(await ingest(server, hook, 64, COUNT));
      floor1.push(await ingest(server, UNROUTED, 1, COUNT));
      const f0 = cpuNow(server);
      floor32.push(await ingest(server, UNROUTED, 32, COUNT));
      floorCpu = cpuPer(f0, cpuNow(server), COUNT);
    }
    const lone = await loneInterleaved(server, client, { hook, count: COUNT, block: LONE_BLOCK });
    const temp = await insertLoop(client, "bench_temp_insert", COUNT);
    const bareRow = await bareRowCpu(client, 4 * COUNT);
    const { rows } = await client.query<{ n: number }>(`select count(*)::int as n from events where type = 'bench.delivery'`);

    const base = median(plain);
    const f = (rate: number): string => `${Math.round(rate).toString().padStart(6)} /s`;
    const all = (xs: number[]): string => xs.map((x) => Math.round(x)).join(", ");
    console.log(
      `hook ingest: ${COUNT} deliveries per scenario, ${ROUNDS} interleaved rounds, medians; durable commit (fsync on), loopback; host load ${load0} before, ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")} after`,
    );
    console.log(`  plain INSERT loop (1 client, autocommit)  ${f(base)}   rounds: ${all(plain)}`);
    console.log(
      `  hook ingest,  1 sender                    ${f(median(one))}   ${(median(one) / base).toFixed(2)}x (issue 15: >= 0.9x the ceiling below)   rounds: ${all(one)}`,
    );
    console.log(
      `  hook ingest, 32 senders                   ${f(median(many))}   ${(median(many) / base).toFixed(2)}x (target >= 3x)   rounds: ${all(many)}`,
    );
    console.log("  context, not targets:");
    console.log(`    hook ingest, 64 senders: ${f(median(many64))}   ${(median(many64) / base).toFixed(2)}x   rounds: ${all(many64)}`);
    console.log(
      `    HTTP floor, same server, POST to an unrouted path (404, no database work): ${f(median(floor1))} at 1 sender, ${f(median(floor32))} at 32`,
    );
    console.log(`    TEMP table INSERT loop (no WAL flush at commit): ${f(temp)}`);
    const rowFloor = median(direct);
    console.log(
      `    events-row loop, the database part of one delivery alone (flowsvc_record_events_alone, 1 client): ${f(rowFloor)}   ${(rowFloor / base).toFixed(2)}x   rounds: ${all(direct)}`,
    );
    const bound1e = 1 / (1 / median(floor1) + 1 / rowFloor);
    console.log(
      `    1-sender ceiling with that events row instead of the plain one: ${f(bound1e)}; 1 sender reaches ${(median(one) / bound1e).toFixed(2)}x of it`,
    );
    // One sender waits for each 202, so a delivery costs at least an HTTP round trip plus one
    // durable commit: the best 1 sender can do on this host, however little the route does.
    const bound1 = 1 / (1 / median(floor1) + 1 / base);
    console.log(
      `    1-sender ceiling, one HTTP round trip then one commit per delivery: ${f(bound1)}   ${(bound1 / base).toFixed(2)}x; 1 sender reaches ${(median(one) / bound1).toFixed(2)}x of it (target >= 0.9x)`,
    );
    console.log(`    32-sender ceiling, the HTTP floor alone: ${f(median(floor32))}   ${(median(floor32) / base).toFixed(2)}x`);
    if (manyCpu && floorCpu) printCpu({ many: manyCpu, floor: floorCpu, bareRow, base, manyRate: many[ROUNDS - 1]! });
    printInterleaved(lone, LONE_BLOCK);
    const measured = 3 * ROUNDS * COUNT + Math.ceil(COUNT / LONE_BLOCK) * LONE_BLOCK * (1 + MANY_PER_BLOCK) + MANY_PER_BLOCK * LONE_BLOCK;
    console.log(`  bus rows of type bench.delivery: ${rows[0]!.n} (warm-up 400 + ${measured} measured, every one acknowledged)`);
  } finally {
    await client.end().catch(() => undefined);
    await server.stop();
  }
};

await main();
