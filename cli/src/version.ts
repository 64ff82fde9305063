/**
 * The CLI's version, from cli/package.json. Read from this file's place: cli/dist/version.js and
 * the bundle's cli/dist/bundle/main.cjs both lie two directories below cli/.
 */
import { createRequire } from "node:module";

export const cliVersion = (): string => (createRequire(import.meta.url)("../../package.json") as { version: string }).version;
