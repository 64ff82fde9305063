/**
 * The bundle's entry (scripts/bundle-cli.mjs builds it as cli/dist/bundle/flow.cjs, which
 * cli/bin/flow.js and cli/dist/bin/flow.js require): answers `flow --version` alone, and runs the
 * program from the bundle built for the invoked top-level command (cmd-<name>.cjs: main.ts with
 * only that command's module), else from main.cjs (every command: help, completion, in-script
 * calls, an unknown name). A command then compiles its own code and commander, not every other
 * command's (issue 15: start-up). Only meaningful inside the bundle directory.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { topCommandOf } from "../commands/route.js";
import { cliVersion } from "../version.js";

const argv = process.argv;
if (argv.length === 3 && (argv[2] === "--version" || argv[2] === "-V")) {
  process.stdout.write(`${cliVersion()}\n`);
} else {
  const top = topCommandOf(argv);
  const own = top !== undefined && /^[a-z][a-z-]*$/.test(top) ? fileURLToPath(new URL(`./cmd-${top}.cjs`, import.meta.url)) : undefined;
  createRequire(import.meta.url)(own !== undefined && existsSync(own) ? own : fileURLToPath(new URL("./main.cjs", import.meta.url)));
}
