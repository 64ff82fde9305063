#!/usr/bin/env node
// The `flow` executable that npm links into node_modules/.bin at install time. npm links only
// files that exist then, and a fresh clone has no build output yet, so this checked-in file is the
// link target and loads the compiled CLI (built by `npm install`'s prepare step).
//
// It is CommonJS (cli/bin/package.json): it requires the bundle scripts/bundle-cli.mjs writes,
// cli/dist/bundle/flow.cjs (which runs the command's own bundle), so a user command loads no ES module (Node's ES module loader costs
// start-up time, issue 15). When the bundle is missing or older than tsc's last build of the CLI
// (`tsc -b` alone leaves it stale), it runs tsc's output instead, as cli/dist/bin/flow.js does.
"use strict";
const { statSync } = require("node:fs");
const { join } = require("node:path");

const mtimeOf = (path) => statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? -1;
const bundle = join(__dirname, "..", "dist", "bundle", "flow.cjs");
const bundleMtime = mtimeOf(bundle);
if (bundleMtime >= 0 && bundleMtime >= mtimeOf(join(__dirname, "..", "tsconfig.tsbuildinfo"))) require(bundle);
else import("../dist/bin/main.js");
