/**
 * The statements of one run's life (issue 15 item 7): one `echo hi` run submitted and watched on a
 * direct connection to the embedded Postgres; every query the server's pg client sent meanwhile
 * is printed in order (the server runs with a preload, written here, that appends each query's
 * text to a file). The server's own pollers (timers, schedules, graph work) show up too.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createRequire } from "node:module";
import pg from "pg";
import { api, startBenchServer } from "./support.js";

// Every Node process under the server loads it (agents, in-script clients, possibly as another user): it must never fail one.
const PRELOAD = `try {
  const fs = require("node:fs");
  const pg = require(process.env.PG_TRACE_PG);
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (config) {
    const text = typeof config === "string" ? config : config && config.text;
    try {
      fs.appendFileSync(process.env.PG_TRACE_FILE, JSON.stringify({ pid: process.pid, text }) + "\\n");
    } catch {}
    return query.apply(this, arguments);
  };
} catch {}
`;

const dir = mkdtempSync(join(tmpdir(), "flowsvc-statements-"));
const file = join(dir, "trace.jsonl");
chmodSync(dir, 0o755); // an agent running as another user reads the preload too
writeFileSync(join(dir, "preload.cjs"), PRELOAD, { mode: 0o644 });
// The pg module the server loads (store's), so the preload patches the same one.
const storePg = createRequire(join(dirname(createRequire(import.meta.url).resolve("@flowsvc/store")), "x.js")).resolve("pg");
const server = await startBenchServer(1, {
  NODE_OPTIONS: `--require ${join(dir, "preload.cjs")}`,
  PG_TRACE_FILE: file,
  PG_TRACE_PG: storePg,
});
const pid = readFileSync(join(server.dataDir, "pg", "postmaster.pid"), "utf8").split("\n");
const password = readFileSync(join(server.dataDir, "pg-password"), "utf8").trim();
const db = new pg.Client({ host: "127.0.0.1", port: Number(pid[3]), user: "postgres", password, database: "flowsvc" });
await db.connect();
const one = async (): Promise<void> => {
  const { id } = await api<{ id: string }>(server, "POST", "/runs", { kind: "script", source: "echo hi\n", filename: "hi.sh" });
  for (;;) {
    const { rows } = await db.query<{ status: string }>("select status from runs where id = $1", [id]);
    if (rows[0]?.status === "succeeded") return;
    await new Promise((r) => setTimeout(r, 20));
  }
};
try {
  await one();
  await new Promise((r) => setTimeout(r, 500));
  writeFileSync(file, "");
  await one();
  await new Promise((r) => setTimeout(r, 300));
  const lines = readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { pid: number; text: string })
    .filter((l) => l.pid === server.process.pid);
  console.log(`${lines.length} statements (begin and commit included) from submit to succeeded, and the pollers':`);
  for (const l of lines) console.log(`  ${l.text.replace(/\s+/g, " ").slice(0, 200)}`);
} finally {
  await db.end();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
