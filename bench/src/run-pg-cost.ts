/**
 * Where Postgres's time per run goes (issue 15 item 7): a `flow server` whose embedded Postgres is
 * restarted with pg_stat_statements preloaded, a warm-up of 200 `echo hi` runs, then a burst of
 * RUN_PG_COST_RUNS (default 400) submitted 8 at a time. Prints each statement's execution and
 * planning time, calls, rows, shared blocks and WAL bytes per run (the highest total first), the
 * sum, and per table the inserts, updates, HOT updates and updates that left their page
 * (pg_stat_user_tables). Times are wall times inside Postgres: a loaded host stretches them all;
 * compare builds in the same period.
 *
 * RUN_PG_COST_EXPLAIN=1 also preloads auto_explain, logging every statement's plan with its
 * buffers to the data dir's postgres.log (slow: for finding which plan reads what, not for times).
 * RUN_PG_COST_HOLD=<file>: at the end, writes the embedded Postgres's URL to <file> and keeps the
 * server up until <file> is removed (for EXPLAIN by hand).
 */
import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { TERMINAL_STATUSES_SQL } from "@flowsvc/core";
import type { TestServer } from "@flowsvc/test/support/server";
import { api, startBenchServer } from "./support.js";

const RUNS = Number(process.env["RUN_PG_COST_RUNS"] ?? 400);
const IN_FLIGHT = 8;
const EXPLAIN = process.env["RUN_PG_COST_EXPLAIN"] === "1";
const HOLD = process.env["RUN_PG_COST_HOLD"];

const PRELOAD = [
  `shared_preload_libraries = '${EXPLAIN ? "pg_stat_statements,auto_explain" : "pg_stat_statements"}'`,
  "pg_stat_statements.track = all",
  "pg_stat_statements.track_planning = on",
  ...(EXPLAIN ? ["auto_explain.log_min_duration = 0", "auto_explain.log_nested_statements = on", "auto_explain.log_buffers = on"] : []),
];

const embeddedUrl = (dataDir: string): string => {
  const pid = readFileSync(join(dataDir, "pg", "postmaster.pid"), "utf8").split("\n");
  const password = readFileSync(join(dataDir, "pg-password"), "utf8").trim();
  return `postgres://postgres:${password}@127.0.0.1:${pid[3]}/flowsvc`;
};

const connect = async (dataDir: string): Promise<pg.Client> => {
  const client = new pg.Client({ connectionString: embeddedUrl(dataDir) });
  await client.connect();
  return client;
};

const submitAll = async (server: TestServer, tag: string, n: number): Promise<void> => {
  let next = 0;
  const submitter = async (): Promise<void> => {
    while (next < n) {
      next++;
      await api(server, "POST", "/runs", { kind: "script", source: "echo hi\n", filename: "hi.sh", tags: [tag] });
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, submitter));
};

/** Polls every 50 ms until `n` runs of the tag have ended. */
const waitAllEnded = async (db: pg.Client, tag: string, n: number): Promise<void> => {
  for (;;) {
    const { rows } = await db.query<{ ended: string }>(
      `select count(*) as ended from runs where tags @> array[$1]::text[] and status in (${TERMINAL_STATUSES_SQL})`,
      [tag],
    );
    if (Number(rows[0]!.ended) >= n) return;
    await new Promise((r) => setTimeout(r, 50));
  }
};

interface StatementRow {
  calls: string;
  exec: number;
  plan: number;
  rows: string;
  blocks: string;
  wal: string;
  query: string;
}

const printStatements = async (db: pg.Client): Promise<void> => {
  // The watcher's own polls are statements too: they are listed (they mention `tags @>`), not hidden.
  const { rows } = await db.query<StatementRow>(
    `select calls, total_exec_time as exec, total_plan_time as plan, rows, shared_blks_hit + shared_blks_read as blocks,
            wal_bytes as wal, query
       from pg_stat_statements where query not like '%pg_stat%' order by total_exec_time + total_plan_time desc`,
  );
  const per = (x: number | string): string => (Number(x) / RUNS).toFixed(3);
  console.log(`${RUNS} runs of \`echo hi\`, ${IN_FLIGHT} submits in flight (load ${loadavg()[0]!.toFixed(2)})`);
  console.log("  per run: exec ms, plan ms, calls, rows, shared blocks, WAL bytes; statement");
  let ms = 0;
  let calls = 0;
  for (const r of rows) {
    ms += r.exec + r.plan;
    calls += Number(r.calls);
    if (Number(r.calls) / RUNS < 0.005) continue;
    console.log(
      `  ${per(r.exec)} ${per(r.plan)} ${per(r.calls)} ${per(r.rows)} ${(Number(r.blocks) / RUNS).toFixed(1)} ${(Number(r.wal) / RUNS).toFixed(0)}  ` +
        r.query.replace(/\s+/g, " ").slice(0, 160),
    );
  }
  console.log(`  in all ${(ms / RUNS).toFixed(3)} ms and ${(calls / RUNS).toFixed(1)} statements per run`);
};

const printTables = async (db: pg.Client): Promise<void> => {
  const { rows } = await db.query<{ relname: string; ins: string; upd: string; hot: string; newpage: string }>(
    `select relname, n_tup_ins as ins, n_tup_upd as upd, n_tup_hot_upd as hot, n_tup_newpage_upd as newpage
       from pg_stat_user_tables where n_tup_ins + n_tup_upd + n_tup_del > 0 order by n_tup_upd + n_tup_ins desc`,
  );
  for (const r of rows) {
    const per = (x: string): string => (Number(x) / RUNS).toFixed(2);
    console.log(
      `  ${r.relname}: per run ${per(r.ins)} inserts, ${per(r.upd)} updates (${per(r.hot)} HOT, ${per(r.newpage)} to another page)`,
    );
  }
};

const hold = async (dataDir: string, file: string): Promise<void> => {
  writeFileSync(file, `${embeddedUrl(dataDir)}\n`);
  console.log(`  holding: the embedded Postgres's URL is in ${file}; remove it to stop`);
  while (existsSync(file)) await new Promise((r) => setTimeout(r, 500));
};

const main = async (): Promise<void> => {
  const server = await startBenchServer(4);
  try {
    await server.kill("SIGTERM");
    appendFileSync(join(server.dataDir, "pg", "postgresql.conf"), `\n${PRELOAD.join("\n")}\n`);
    await server.restart();
    const db = await connect(server.dataDir);
    try {
      await db.query("create extension if not exists pg_stat_statements");
      await submitAll(server, "warmup", 200);
      await waitAllEnded(db, "warmup", 200);
      await db.query("select pg_stat_statements_reset(), pg_stat_reset()");
      await submitAll(server, "burst", RUNS);
      await waitAllEnded(db, "burst", RUNS);
      await printStatements(db);
      await printTables(db);
      if (HOLD) await hold(server.dataDir, HOLD);
    } finally {
      await db.end();
    }
  } finally {
    await server.stop();
  }
};

await main();
