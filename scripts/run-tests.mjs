#!/usr/bin/env node
// Runs every compiled test file with node:test. Unit tests sit beside the code
// (`<workspace>/src/**/*.test.ts` -> `dist/**/*.test.js`); cross-part tests live in test/.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

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
const r = spawnSync(process.execPath, ["--test", "--test-concurrency=2", ...selected], { stdio: "inherit" });
process.exit(r.status ?? 1);
