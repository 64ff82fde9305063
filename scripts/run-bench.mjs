#!/usr/bin/env node
// Runs the compiled benchmarks one after another; each prints its figures. Nothing is asserted.
import { readdirSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const dir = join("bench", "dist");
const only = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".js") && f !== "support.js" && !f.endsWith(".test.js"))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)));
let failed = 0;
for (const f of files) {
  console.log(`\n== ${f.replace(/\.js$/, "")}`);
  const r = spawnSync(process.execPath, [join(dir, f)], { stdio: "inherit" });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
