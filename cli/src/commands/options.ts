/**
 * The commander side of the shared options (parsers.ts has the parsers and descriptions, without
 * commander): the commands built with commander directly import both from here.
 */
import { Option } from "commander";
import { OUTPUT_OPTION } from "./parsers.js";

export * from "./parsers.js";

/** `-o json|yaml` on every list, show and status command; the default is a table for people. */
export const outputOption = (): Option => new Option(OUTPUT_OPTION.flags, OUTPUT_OPTION.description).choices(OUTPUT_OPTION.choices ?? []);
