#!/usr/bin/env node
/**
 * The `flow` binary. It runs main.ts from the bundle `npm run build` writes (scripts/bundle-cli.mjs:
 * one file per command, commander inlined, so a command starts in about the time of `node -e 0`),
 * or from tsc's output when there is no bundle or tsc ran after it (`tsc -b` alone leaves the
 * bundle stale: the unbundled files are then the current ones).
 */
import { statSync } from "node:fs";

const BUNDLE = new URL("../bundle/main.js", import.meta.url);
// tsc -b rewrites the CLI's build info whenever it emits any file of it.
const BUILD_INFO = new URL("../../tsconfig.tsbuildinfo", import.meta.url);

const mtimeOf = (url: URL): number => statSync(url, { throwIfNoEntry: false })?.mtimeMs ?? -1;

const bundleMtime = mtimeOf(BUNDLE);
if (bundleMtime >= 0 && bundleMtime >= mtimeOf(BUILD_INFO)) await import(BUNDLE.href);
else await import("./main.js");
