#!/usr/bin/env node
// Runs every compiled test file with node:test, in two phases:
//   1. unit: every `*.test.js` under core, store, controller, ingest, agent-image and cli dist.
//      A unit test sits beside its code (`<workspace>/src/**/*.test.ts`) and starts no `flow server`
//      process (it may use the test Postgres, a socket, an in-process Fastify app or a child script).
//   2. cross-part: the end-to-end tests in test/dist (the real `flow server`, CLI and agents).
// A failure in phase 1 ends the run (exit 1) before phase 2, so a broken rule fails in seconds.
// Arguments are substrings of the dist paths: `node scripts/run-tests.mjs store/dist/calls test/dist/durable`
// runs only the matching files (each in its phase); a phase with no match is skipped.
//
// One embedded Postgres serves the whole run: it is started here in a temp dir and handed to the
// test processes as FLOWSVC_TEST_PG_URL (store's createTestDatabase clones a migrated template in
// it per test), then stopped, also on SIGINT/SIGTERM. A FLOWSVC_TEST_PG_URL already set is used as is.
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { spawn } from "node:child_process";
import { startEmbeddedPostgres } from "../store/dist/embedded-postgres.js";

const walk = (dir, files = []) => {
  let names;
  try {
    names = readdirSync(dir);
  } catch {
    return files;
  }
  for (const n of names) {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) walk(p, files);
    else if (n.endsWith(".test.js")) files.push(p);
  }
  return files;
};
/**
 * The slowest files start first (longest-processing-time order), so no long file runs alone at the
 * end of a phase while the other core idles. Measured on 2 cores on 2026-11-24, slowest first; a
 * file not named keeps its place after these. A stale list only costs time, never a test.
 */
const SLOW_FIRST = [
  "cli/dist/bin/flow-api.test",
  "cli/dist/bin/flow.test",
  "agent-image/dist/protocol/",
  "store/dist/embedded-postgres.test",
  "agent-image/dist/client/client-commands.test",
  "agent-image/dist/client/client-events.test",
  "agent-image/dist/client/client-fanout.test",
  // Not measured on an idle machine yet: 18 s at load 5, 30 s at load 12 on 2 cores (2026-11-26).
  "test/dist/soak/soak.test",
  "test/dist/interpreters.test",
  "test/dist/kube/launcher.test",
  "test/dist/sdk-rust.test",
  "test/dist/kube/leader.test",
  "test/dist/bus.test",
  "test/dist/agent-reuse.test",
  "test/dist/durable.test",
  "test/dist/bus-script.test",
  "test/dist/secret-channels.test",
  "test/dist/agent.test",
  "test/dist/server.test",
  "test/dist/local-isolation.test",
  "test/dist/hooks.test",
  "test/dist/durable-policy.test",
  "test/dist/cli.test",
  "test/dist/graphs.test",
  // Not measured on an idle machine yet: 30 s at load 18 on 2 cores (2026-11-26).
  "test/dist/approvals.test",
];
const rank = (file) => {
  const i = SLOW_FIRST.findIndex((s) => file.split(sep).join("/").includes(s));
  return i < 0 ? SLOW_FIRST.length : i;
};
const slowFirst = (files) =>
  files
    .map((f, i) => ({ f, i }))
    .sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i)
    .map(({ f }) => f);
const only = process.argv.slice(2);
const pick = (files) => slowFirst(only.length ? files.filter((f) => only.some((o) => f.includes(o))) : files);
// Files run at once per phase. FLOWSVC_TEST_CONCURRENCY (one number, or `unit,cross` e.g. `3,4`) overrides, to measure.
const [unitConcurrency, crossConcurrency] = (process.env.FLOWSVC_TEST_CONCURRENCY ?? "2,2").split(",").map(Number);
if (![unitConcurrency, crossConcurrency ?? 1].every((n) => Number.isInteger(n) && n >= 1 && n <= 16)) {
  console.error(`error: FLOWSVC_TEST_CONCURRENCY=${process.env.FLOWSVC_TEST_CONCURRENCY}: want one or two integers 1-16, e.g. 3,4`);
  process.exit(2);
}
const phases = [
  {
    name: "unit",
    concurrency: unitConcurrency,
    files: pick(["core", "store", "controller", "ingest", "agent-image", "cli"].flatMap((w) => walk(join(w, "dist")))),
  },
  { name: "cross-part", concurrency: crossConcurrency ?? unitConcurrency, files: pick(walk(join("test", "dist"))) },
].filter((p) => p.files.length > 0);
if (phases.length === 0) {
  console.error("no test files found");
  process.exit(1);
}

let cluster;
let dataDir;
let stopping;
const stopCluster = () =>
  (stopping ??= (async () => {
    try {
      await cluster?.stop();
    } catch (err) {
      console.error(`test Postgres: ${err.message}`);
    }
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

let child;
let signalled;
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    // A terminal's Ctrl-C already reached the runner (same process group); a kill(1) did not.
    signalled = sig;
    child?.kill(sig);
  });
}

/** Runs one phase's files in one `node --test`; answers its exit code. */
const runPhase = (phase) =>
  new Promise((resolve) => {
    console.log(`# phase ${phase.name}: ${phase.files.length} test files`);
    child = spawn(process.execPath, ["--test", `--test-concurrency=${phase.concurrency}`, ...phase.files], {
      stdio: "inherit",
      env: { ...process.env, FLOWSVC_TEST_PG_URL: adminUrl },
    });
    child.on("exit", (c) => resolve(c ?? 1));
    child.on("error", (err) => {
      console.error(`error: could not run node --test: ${err.message}`);
      resolve(1);
    });
  });

let code = 0;
for (const [i, phase] of phases.entries()) {
  const started = Date.now();
  code = await runPhase(phase);
  console.log(`# phase ${phase.name}: exit ${code} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (code === 0 && !signalled) continue;
  if (!signalled && i + 1 < phases.length) console.error(`# phase ${phase.name} failed: phase ${phases[i + 1].name} not run`);
  break;
}
await stopCluster();
process.exit(signalled ? 128 + (signalled === "SIGINT" ? 2 : 15) : code);
