/**
 * Test and bench aid: `node --import <this file> cli/bin/flow.js ...` appends the URL of every
 * module the process resolves (ESM imports, and the packages it imports from CommonJS) to the file
 * named by FLOW_IMPORT_LOG, one per line. flow-imports.test.ts uses it to prove a client command
 * loads no server module. Not loaded by `flow` itself.
 */
import { register } from "node:module";
import { processEnvironment } from "../config.js";

const log = processEnvironment().FLOW_IMPORT_LOG;
if (log) register("./import-recorder-hooks.js", import.meta.url, { data: { log } });
