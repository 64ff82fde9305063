/**
 * The CLI's version, from cli/package.json. Read from this file's place: cli/dist/version.js and
 * the bundle's cli/dist/bundle/*.cjs all lie two directories below cli/. Read and parsed as a
 * file, not required: require() of a JSON file from a CommonJS bundle costs ~1-2 ms more of
 * start-up (a Module and its resolution) on every command (issue 15).
 */
import { readFileSync } from "node:fs";

export const cliVersion = (): string =>
  (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
