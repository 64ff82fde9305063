#!/usr/bin/env node
// The `flow` executable that npm links into node_modules/.bin at install time. npm links only
// files that exist then, and a fresh clone has no build output yet, so this checked-in file is the
// link target and loads the compiled CLI (built by `npm install`'s prepare step).
import "../dist/bin/flow.js";
