#!/usr/bin/env node
// Runs every compiled test file with node:test. Unit tests sit beside the code
// (`<workspace>/src/**/*.test.ts` -> `dist/**/*.test.js`); cross-part tests live in test/.
//
// One embedded Postgres serves the whole run: it is started here in a temp dir and handed to the
// test processes as FLOWSVC_TEST_PG_URL (store's createTestDatabase clones a migrated template in
// it per test), then stopped, also on SIGINT/SIGTERM. A FLOWSVC_TEST_PG_URL already set is used as is.
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { startEmbeddedPostgres } from "../store/dist/embedded-postgres.js";

const roots = ["core", "store", "controller", "ingest", "agent-image", "cli", "test"].map((w) => join(w, "dist"));
const files = [];
const walk = (dir) => {
  let names;
  try { names = readdirSync(dir); } catch { return; }
  for (const n of names) {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) walk(p);
    else if (n.endsWith(".test.js")) files.push(p);
  }
};
roots.forEach(walk);
const only = process.argv.slice(2);
const selected = only.length ? files.filter((f) => only.some((o) => f.includes(o))) : files;
if (selected.length === 0) { console.error("no test files found"); process.exit(1); }

let cluster;
let dataDir;
let stopping;
const stopCluster = () => (stopping ??= (async () => {
  try { await cluster?.stop(); } catch (err) { console.error(`test Postgres: ${err.message}`); }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
})());

let adminUrl = process.env.FLOWSVC_TEST_PG_URL;
if (!adminUrl) {
  dataDir = mkdtempSync(join(tmpdir(), "flowsvc-test-cluster-"));
  try {
    cluster = await startEmbeddedPostgres({ dataDir, durable: false });
  } catch (err) {
    console.error(`error: could not start the test Postgres: ${err.message}`);
    await stopCluster();
    process.exit(1);
  }
  const url = new URL(cluster.url);
  url.pathname = "/postgres";
  adminUrl = url.toString();
}

const child = spawn(process.execPath, ["--test", "--test-concurrency=2", ...selected], {
  stdio: "inherit",
  env: { ...process.env, FLOWSVC_TEST_PG_URL: adminUrl },
});
let signalled;
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    // A terminal's Ctrl-C already reached the runner (same process group); a kill(1) did not.
    signalled = sig;
    child.kill(sig);
  });
}
const code = await new Promise((resolve) => {
  child.on("exit", (c) => resolve(c));
  child.on("error", (err) => { console.error(`error: could not run node --test: ${err.message}`); resolve(1); });
});
await stopCluster();
process.exit(signalled ? 128 + (signalled === "SIGINT" ? 2 : 15) : (code ?? 1));
