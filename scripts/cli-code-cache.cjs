#!/usr/bin/env node
// Writes the V8 code cache of one CLI bundle (scripts/bundle-cli.mjs runs it for each command's
// bundle and main.cjs): `node scripts/cli-code-cache.cjs <bundle.cjs> <argv JSON>...` compiles the
// bundle exactly as cli/src/bin/entry.ts does (node:module's wrap, vm.Script), runs it once per argv
// given (`["status", "--help"]`, then `["status", "<id>"]`: `flow status --help` builds the command's
// commander program and prints its help, `flow status <id>` parses, reads the config, asks the API
// and prints), one after the other, against a stand-in API in this process (127.0.0.1, answering
// every request with one object that has what each warmed command reads), and at the end writes
// script.createCachedData() to <bundle.cjs>.v8cache. The cache then holds every function those runs
// compiled, so a later `flow status ...` deserializes them instead of compiling (entry.ts; V8 rejects
// a cache made by another Node version or with other V8 flags, and entry.ts then compiles the source
// as without one). Output is the caller's to ignore; the caller sets a temporary HOME and config.
"use strict";
const { readFileSync, writeFileSync } = require("node:fs");
const { createServer } = require("node:http");
const { createRequire, wrap } = require("node:module");
const { dirname, join } = require("node:path");
const { Script } = require("node:vm");

const [file, ...argvs] = process.argv.slice(2);
if (!file || argvs.length === 0) throw new Error("usage: cli-code-cache.cjs <bundle.cjs> <argv JSON>...");
const source = readFileSync(file, "utf8");
// In a vm.Script import() needs an experimental loader: no cache for a bundle with an import() of its own
// (entry.ts requires it), but for the guarded ones: main.ts's import of the in-script client is in every
// bundle, and signal.ts's of the local engine in cmd-signal.cjs; entry.ts requires the bundle when an
// invocation may reach one (route.ts's mayBeInScript; local-state-dir.ts's mayBeLocalRun for `flow signal`).
const GUARDED_IMPORTS = ["import(IN_SCRIPT_PACKAGE)", 'import("../local/local-signal.js")'];
const guarded = GUARDED_IMPORTS.reduce((n, text) => n + source.split(text).length - 1, 0);
if (source.match(/\bimport\(/g).length !== guarded) process.exit(0);
const script = new Script(wrap(source), { filename: file });

const RUN_ID = "run-01jd8k2m3n4p5q6r7s8t9v0w1x";
// One answer for every warmed command: a run (status, submit, cancel, ...), an empty list (`items`: every
// `ls`), the gates of a run and the answer to one (approve), a user (login).
const ANSWER = JSON.stringify({
  id: RUN_ID,
  run_id: RUN_ID,
  status: "succeeded",
  created_at: new Date(0).toISOString(),
  runs: [],
  steps: [],
  items: [],
  gates: [{ gate: "g", prompt: "p", fields: [] }],
  gate: "g",
  decision: "approve",
  approved_by: "code-cache",
  fields: {},
  user: "code-cache",
});
const api = createServer((req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(req.method === "POST" ? 201 : 200, { "content-type": "application/json" }).end(ANSWER));
});

const runNext = () => {
  const args = argvs.shift();
  if (args === undefined) {
    api.close();
    writeFileSync(`${file}.v8cache`, script.createCachedData());
    process.exitCode = 0; // a warm-up run's own status (an answer a command refused) is not the build's
    return;
  }
  process.argv = [process.execPath, join(dirname(file), "flow.cjs"), ...JSON.parse(args)];
  const module_ = { exports: {} };
  script.runInThisContext()(module_.exports, createRequire(file), module_, file, dirname(file));
};

api.listen(0, "127.0.0.1", () => {
  process.env.FLOWSVC_URL = `http://127.0.0.1:${api.address().port}`;
  api.unref();
  // A run is over when nothing is left to do: then the next one starts.
  process.on("beforeExit", runNext);
  runNext();
});
