#!/usr/bin/env node
/**
 * The `flow` binary as tsc builds it (tests and `npm start` run this file; the `flow` npm links is
 * cli/bin/flow.js, which makes the same choice without starting the ES module loader). It runs
 * main.ts from the bundle `npm run build` writes (scripts/bundle-cli.mjs: one CommonJS file, so a
 * command starts in about the time of `node -e 0`), or from tsc's output when there is no bundle or
 * tsc ran after it (`tsc -b` alone leaves the bundle stale: the unbundled files are then the current ones).
 */
import { statSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const BUNDLE = new URL("../bundle/flow.cjs", import.meta.url);
// tsc -b rewrites the CLI's build info whenever it emits any file of it.
const BUILD_INFO = new URL("../../tsconfig.tsbuildinfo", import.meta.url);

const mtimeOf = (url: URL): number => statSync(url, { throwIfNoEntry: false })?.mtimeMs ?? -1;

const bundleMtime = mtimeOf(BUNDLE);
if (bundleMtime >= 0 && bundleMtime >= mtimeOf(BUILD_INFO)) createRequire(import.meta.url)(fileURLToPath(BUNDLE));
else await import("./main.js");
