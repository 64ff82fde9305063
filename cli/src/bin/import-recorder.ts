/**
 * Test and bench aid: `node --import <this file> cli/bin/flow.js ...` appends the URL of every
 * module the process resolves to the file named by FLOW_IMPORT_LOG, one per line: ES modules as
 * they are resolved, and at exit every CommonJS module in require's cache (Node 20's resolve hook
 * does not see require(): the CLI's bundle, cli/dist/bundle/main.cjs, is CommonJS). flow-imports.test.ts
 * uses it to prove a client command loads no server module. Not loaded by `flow` itself.
 */
import { appendFileSync } from "node:fs";
import { createRequire, register } from "node:module";
import { pathToFileURL } from "node:url";
import { processEnvironment } from "../config.js";

const log = processEnvironment().FLOW_IMPORT_LOG;
if (log) {
  register("./import-recorder-hooks.js", import.meta.url, { data: { log } });
  const cache = createRequire(import.meta.url).cache;
  process.on("exit", () => {
    const files = Object.keys(cache).map((file) => `${pathToFileURL(file).href}\n`);
    appendFileSync(log, files.join(""));
  });
}
